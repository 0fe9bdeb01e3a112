"""What the meta-test catalog's gradings cost, and what forking them from a
warm judge saves (issue 29): ``python -m tools.bench.meta [NAME ...]
[--every N]``.

Each named mutant or variant (default: every Nth of both catalogs, N = 20)
is graded as tests/test_mutants.py and tests/test_variants.py grade it (its
``run`` items, one judge process, bubblewrap), twice in a row: by a fresh
judge (``run_judge`` as the grader starts it) and by a judge forked from one
ForkServer (conformance/judge/forkserver.py), alternately, so both see the
same load. Every test's outcome and message must be the same both ways,
what depends on the clock aside (numbers with a decimal point; the note
that shrinking reached its time budget, which a loaded machine reaches
sooner); exit 1 otherwise: a verdict changed. Printed: per grading the phases of
results.json's ``timings`` (fresh way), and the CPU-seconds of each way in
all (``RUSAGE_CHILDREN``: judges, their workers, and the fork server with
its start-up, which the forked way pays once).
"""

import argparse
import json
import os
import re
import resource
import sys
import time
from typing import Any

from lmspec.conformance.judge.forkserver import ForkServer
from lmspec.tools import mutants
from lmspec.tools.grade.results import timings

_DURATION = re.compile(r"\d+\.\d+")
_SHRINK_NOTE = re.compile(r"\n\(shrinking stopped at its time budget[^)]*\)")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _grade(entry: mutants.Entry, server: ForkServer | None) -> tuple[dict[str, Any], float]:
    start = time.time()
    report = mutants.run_suite(entry.path, entry.run, profile=entry.meta.get("profile"), server=server)
    return report, time.time() - start


def _outcomes(report: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Every test's outcome and message, what depends on the clock left out: measured durations (a
    speed test's "took 1.62 s") and the note that shrinking reached its time budget (--shrink-budget)."""
    return {
        t["nodeid"]: (t.get("outcome"), _DURATION.sub("#", _SHRINK_NOTE.sub("", str(t.get("message") or ""))))
        for t in report.get("tests") or []
    }


def _difference(fresh: tuple[Any, str] | None, forked: tuple[Any, str] | None) -> str:
    if fresh is None or forked is None or fresh[0] != forked[0]:
        return f"    fresh: {fresh and fresh[0]}\n    forked: {forked and forked[0]}"
    at = next((i for i, (x, y) in enumerate(zip(fresh[1], forked[1])) if x != y), min(len(fresh[1]), len(forked[1])))
    around = slice(max(0, at - 80), at + 160)
    return f"    fresh: ...{fresh[1][around]!r}\n    forked: ...{forked[1][around]!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.meta", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutant or variant file stems (default: every --every-th)")
    parser.add_argument("--every", type=int, default=20)
    args = parser.parse_args(argv)
    catalog = mutants.discover() + mutants.discover(mutants.VARIANTS_DIR, "VARIANT")
    by_name = {e.name: e for e in catalog}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"no mutant or variant named {', '.join(unknown)}")
    entries = [by_name[n] for n in args.names] if args.names else catalog[:: max(1, args.every)]
    load = os.getloadavg()[0]
    fresh_cpu = 0.0
    server = ForkServer()
    base = _cpu()
    changed = []
    rows = []
    for entry in entries:
        before = _cpu()
        fresh, fresh_wall = _grade(entry, None)
        fresh_cpu += _cpu() - before
        forked, forked_wall = _grade(entry, server)
        a, b = _outcomes(fresh), _outcomes(forked)
        same = a == b
        if not same:
            changed.append(entry.name)
            for nodeid in sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)):
                print(f"  {entry.name}: {nodeid} differs:\n{_difference(a.get(nodeid), b.get(nodeid))}")
        phases = timings(fresh, fresh.get("stamps", {}).get("imported", 0.0), fresh_wall) if fresh.get("stamps") else {}
        rows.append(
            {
                "name": entry.name,
                "tests": len(fresh.get("tests") or []),
                "same": same,
                "fresh_wall_s": round(fresh_wall, 1),
                "forked_wall_s": round(forked_wall, 1),
                **{k: phases.get(k) for k in ("collection_s", "tests_summed_s", "shrinking_s")},
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    server.close()
    forked_cpu = _cpu() - base - fresh_cpu
    n = len(entries)
    print(
        f"{n} gradings, load {load:.1f} -> {os.getloadavg()[0]:.1f}: fresh judges {fresh_cpu:.1f} CPU-s "
        f"({fresh_cpu / n:.2f} each), forked {forked_cpu:.1f} CPU-s ({forked_cpu / n:.2f} each, the server's "
        f"start-up included), ratio {forked_cpu / fresh_cpu:.2f}; outcomes changed: {changed or 'none'}"
    )
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
