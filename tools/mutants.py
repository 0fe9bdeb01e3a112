"""Mutation testing of the suite itself.

Each file in tests/mutants/ is an adapter with one realistic bug and a
``MUTANT = {"spec": ..., "bug": ..., "run": [...]}`` header. A mutant is
*killed* when the conformance tests of its ``run`` spec ids report at least one
failure. ``python -m tools.mutants`` (``nox -s mutants``) prints the kill rate
per spec section and lists survivors; it exits 1 if any mutant survives.
Variants in tests/variants/ are the opposite check: correct-but-different
implementations that must pass every test they run.
"""

import argparse
import ast
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from tools.runsuite import REPO, failed, passed, run_suite

MUTANTS_DIR = REPO / "tests" / "mutants"
VARIANTS_DIR = REPO / "tests" / "variants"


class Entry(NamedTuple):
    path: Path
    meta: dict

    @property
    def name(self) -> str:
        return self.path.stem


def _header(path: Path, var: str) -> dict:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == var for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path}: no {var} = {{...}} header")


def discover(folder: Path = MUTANTS_DIR, var: str = "MUTANT") -> list[Entry]:
    return [Entry(p, _header(p, var)) for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")]


class Outcome(NamedTuple):
    entry: Entry
    killed: bool
    failures: list[dict]
    detail: str
    seconds: float


def run_one(entry: Entry, *extra: str) -> Outcome:
    start = time.perf_counter()
    data = run_suite(entry.path, entry.meta.get("run") or [entry.meta["spec"]], *extra)
    fails = failed(data)
    if data.get("adapter_error"):
        detail = f"adapter did not import: {data['adapter_error']}"
        return Outcome(entry, False, [], detail, time.perf_counter() - start)
    if not data["tests"]:
        return Outcome(entry, False, [], "no tests ran:\n" + data["output"], time.perf_counter() - start)
    detail = fails[0]["nodeid"] + ": " + fails[0]["message"] if fails else f"{len(passed(data))} tests passed"
    return Outcome(entry, bool(fails), fails, detail, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="mutant file stems to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    entries = [e for e in discover() if not args.names or e.name in args.names]
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(run_one, entries))
    by_section: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_section[o.entry.meta["spec"]].append(o)
    print(f"{'spec item':22s} {'killed':>7s} {'total':>6s}  rate")
    for section in sorted(by_section):
        group = by_section[section]
        k = sum(o.killed for o in group)
        print(f"{section:22s} {k:7d} {len(group):6d}  {k / len(group):5.0%}")
    total_killed = sum(o.killed for o in outcomes)
    print(f"{'TOTAL':22s} {total_killed:7d} {len(outcomes):6d}  {total_killed / max(1, len(outcomes)):5.0%}")
    survivors = [o for o in outcomes if not o.killed]
    for o in survivors:
        print(f"SURVIVOR {o.entry.name} ({o.entry.meta['spec']}: {o.entry.meta['bug']}): {o.detail}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
