"""What diagnosis costs a failing grading (issue 31): ``python -m
tools.bench.hints [NAME ...] [--every N]``.

Each named mutant (default: every Nth of the catalog, N = 8) is graded as
tests/test_mutants.py grades it (its ``run`` items, a judge forked from one
warm judge, bubblewrap), twice: with hints as a grading has them, and with
``LMSPEC_HINTS=off`` in the judge's environment (conformance/hints.py
``reporting``: no replays, no second inputs, no part swaps, no near misses),
in alternating order so both see the same load. Printed per grading: the
wall time and the tests' summed time both ways and the causes named; then
the totals, and the share of a failing grading's wall time that hints take.
Outcomes must be the same both ways (hints only add to a failure's message);
exit 1 otherwise.
"""

import argparse
import json
import os
import sys
import time
from typing import Any

from lmspec.conformance.hints import named_causes
from lmspec.conformance.judge.forkserver import ForkServer
from lmspec.tools import mutants


def _grade(entry: mutants.Entry, server: ForkServer, hints: bool) -> tuple[dict[str, Any], float]:
    if hints:
        os.environ.pop("LMSPEC_HINTS", None)
    else:
        os.environ["LMSPEC_HINTS"] = "off"
    try:
        start = time.perf_counter()
        report = mutants.run_suite(entry.path, entry.run, profile=entry.meta.get("profile"), server=server)
        return report, time.perf_counter() - start
    finally:
        os.environ.pop("LMSPEC_HINTS", None)


def _summed(report: dict[str, Any]) -> float:
    return sum(float(t.get("duration_s") or 0.0) for t in report.get("tests") or [])


def _causes(report: dict[str, Any]) -> list[str]:
    return sorted({c for t in report.get("tests") or [] for c in named_causes(str(t.get("message") or ""))})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.hints", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutant file stems (default: every --every-th)")
    parser.add_argument("--every", type=int, default=8)
    args = parser.parse_args(argv)
    catalog = mutants.discover()
    by_name = {e.name: e for e in catalog}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"no mutant named {', '.join(unknown)}")
    entries = [by_name[n] for n in args.names] if args.names else catalog[:: max(1, args.every)]
    load = os.getloadavg()[0]
    server = ForkServer()
    totals = {"on_wall": 0.0, "off_wall": 0.0, "on_tests": 0.0, "off_tests": 0.0}
    changed = []
    try:
        for i, entry in enumerate(entries):
            order = (True, False) if i % 2 == 0 else (False, True)
            graded = {hints: _grade(entry, server, hints) for hints in order}
            (on, on_wall), (off, off_wall) = graded[True], graded[False]
            outcomes = [{t["nodeid"]: t.get("outcome") for t in r.get("tests") or []} for r in (on, off)]
            if outcomes[0] != outcomes[1]:
                changed.append(entry.name)
            row = {
                "name": entry.name,
                "wall_s": [round(on_wall, 1), round(off_wall, 1)],
                "tests_summed_s": [round(_summed(on), 2), round(_summed(off), 2)],
                "causes": _causes(on),
            }
            totals["on_wall"] += on_wall
            totals["off_wall"] += off_wall
            totals["on_tests"] += _summed(on)
            totals["off_tests"] += _summed(off)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    finally:
        server.close()
    n = len(entries)
    extra = totals["on_wall"] - totals["off_wall"]
    print(
        f"{n} gradings (with hints, without), load {load:.1f} -> {os.getloadavg()[0]:.1f}: wall "
        f"{totals['on_wall']:.1f} s vs {totals['off_wall']:.1f} s ({extra / n:+.2f} s a grading, "
        f"{extra / totals['on_wall']:.0%} of it); the tests' summed time {totals['on_tests']:.1f} s vs "
        f"{totals['off_tests']:.1f} s; outcomes changed: {changed or 'none'}"
    )
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
