"""What the meta-test catalog's gradings cost, and what a warm judge and
running lmspec's own adapters inside it save (issue 29): ``python -m
tools.bench.meta [NAME ...] [--every N] [--in-process]``.

Each named mutant or variant (default: every Nth of both catalogs, N = 20)
is graded as tests/test_mutants.py and tests/test_variants.py grade it (its
``run`` items), twice in a row, two ways, alternately so that both see the
same load:

- default: by a fresh judge (``run_judge`` as the grader starts it) and by a
  judge forked from a ForkServer (conformance/judge/forkserver.py), each with
  its sandboxed worker (bubblewrap);
- ``--in-process``: by a forked judge with its sandboxed worker (the fast
  suite's sample) and by a forked judge running the adapter inside itself
  (``--in-process``, the full catalog of ``nox -s meta``).

Every test's outcome and message must be the same both ways, what depends on
the clock aside (numbers with a decimal point; the note that shrinking
reached its time budget, which a loaded machine reaches sooner); exit 1
otherwise: a verdict changed. Printed: per grading the phases of
results.json's ``timings`` (first way) and each way's wall time, then the
CPU-seconds of each way in all: of a fresh judge ``RUSAGE_CHILDREN`` (the
judge), of a forked way its fork server's reaped children (/proc: every
judge it forked; the server's own start-up left out). A sandboxed worker is
killed at the end of its grading and never reaped into either: the CPU of a
sandboxed way is its judges' only, of an in-process way everything.
"""

import argparse
import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

from lmspec.tools import mutants
from lmspec.tools.grade.results import timings

_DURATION = re.compile(r"\d+\.\d+")
_SHRINK_NOTE = re.compile(r"\n\(shrinking stopped at its time budget[^)]*\)")


def _own_children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _server_children_cpu(server: Any) -> float:
    """CPU-seconds of the processes the fork server has reaped (its judges, and the workers they reaped)."""
    proc = getattr(server, "_proc", None)
    if proc is None:
        return 0.0
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime, cstime


class Way:
    def __init__(self, name: str, forked: bool, in_process: bool) -> None:
        self.name, self.in_process = name, in_process
        self.server = mutants.meta_server() if forked else None
        self.cpu = self.wall = 0.0
        # a sandboxed worker is killed at the end of its grading, never reaped into anyone's children's time
        self.counted = "" if in_process else " of judges"

    def children_cpu(self) -> float:
        return _own_children_cpu() if self.server is None else _server_children_cpu(self.server)

    def grade(self, entry: mutants.Entry) -> tuple[dict[str, Any], float]:
        cpu, start = self.children_cpu(), time.time()
        report = mutants.run_suite(
            entry.path, entry.run, profile=entry.meta.get("profile"), server=self.server, in_process=self.in_process
        )
        wall = time.time() - start
        self.wall += wall
        self.cpu += self.children_cpu() - cpu
        return report, wall


def _outcomes(report: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Every test's outcome and message, what depends on the clock left out: measured durations (a
    speed test's "took 1.62 s") and the note that shrinking reached its time budget (--shrink-budget)."""
    return {
        t["nodeid"]: (t.get("outcome"), _DURATION.sub("#", _SHRINK_NOTE.sub("", str(t.get("message") or ""))))
        for t in report.get("tests") or []
    }


def _difference(ways: list[Way], a: tuple[Any, str] | None, b: tuple[Any, str] | None) -> str:
    if a is None or b is None or a[0] != b[0]:
        return f"    {ways[0].name}: {a and a[0]}\n    {ways[1].name}: {b and b[0]}"
    at = next((i for i, (x, y) in enumerate(zip(a[1], b[1])) if x != y), min(len(a[1]), len(b[1])))
    around = slice(max(0, at - 80), at + 160)
    return f"    {ways[0].name}: ...{a[1][around]!r}\n    {ways[1].name}: ...{b[1][around]!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.meta", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutant or variant file stems (default: every --every-th)")
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument(
        "--in-process", action="store_true", help="compare sandboxed workers with adapters run inside the judge"
    )
    args = parser.parse_args(argv)
    catalog = mutants.discover() + mutants.discover(mutants.VARIANTS_DIR, "VARIANT")
    by_name = {e.name: e for e in catalog}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"no mutant or variant named {', '.join(unknown)}")
    entries = [by_name[n] for n in args.names] if args.names else catalog[:: max(1, args.every)]
    load = os.getloadavg()[0]
    if args.in_process:
        ways = [Way("sandboxed", True, False), Way("in-process", True, True)]
    else:
        ways = [Way("fresh", False, False), Way("forked", True, False)]
    changed = []
    for i, entry in enumerate(entries):
        order = ways if i % 2 == 0 else ways[::-1]
        graded = {way.name: way.grade(entry) for way in order}
        (first, first_wall), (second, second_wall) = (graded[w.name] for w in ways)
        a, b = _outcomes(first), _outcomes(second)
        if a != b:
            changed.append(entry.name)
            for nodeid in sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)):
                print(f"  {entry.name}: {nodeid} differs:\n{_difference(ways, a.get(nodeid), b.get(nodeid))}")
        phases = timings(first, first.get("stamps", {}).get("imported", 0.0), first_wall) if first.get("stamps") else {}
        row = {
            "name": entry.name,
            "tests": len(first.get("tests") or []),
            "same": a == b,
            f"{ways[0].name}_wall_s": round(first_wall, 1),
            f"{ways[1].name}_wall_s": round(second_wall, 1),
            **{k: phases.get(k) for k in ("collection_s", "tests_summed_s", "shrinking_s")},
        }
        print(json.dumps(row), flush=True)
    n = len(entries)
    for way in ways:
        if way.server is not None:
            way.server.close()
    print(
        f"{n} gradings, load {load:.1f} -> {os.getloadavg()[0]:.1f}: "
        + "; ".join(
            f"{w.name} {w.wall:.1f} s of wall, {w.cpu:.1f} CPU-s{w.counted} ({w.cpu / n:.2f} each)" for w in ways
        )
        + f"; wall ratio {ways[1].wall / ways[0].wall:.2f}, CPU ratio {ways[1].cpu / max(ways[0].cpu, 1e-9):.2f};"
        f" outcomes changed: {changed or 'none'}"
    )
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
