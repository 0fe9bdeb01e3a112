"""Mutation testing of the suite itself, through the grader's own harness
(conformance.judge.launch: the judge process and its sandboxed worker; with
``--in-process``, as the full catalog of ``nox -s meta`` runs, the same
worker server inside the judge: lmspec's own adapters need no sandbox, and
each grading is then one forked judge, BENCHMARKS.md section 11).

Each file in tests/mutants/ is an adapter with one realistic bug and a
``MUTANT = {"spec": ..., "bug": ..., "run": [...]}`` header. A mutant is
*killed* when a test of its ``run`` spec ids does not pass: under the scored
verdict when a MUST test catches it, or only by tests that are never scored
(STRICT rules, SHOULD items). A bug only those catch is lost to the score, so
such a mutant must say why in its header (``"strict_only": "the handout
does not ..."``). One bug, one item: a header ``"costs": [ids]`` names
exactly the items whose MUST tests the bug may fail (tests/test_mutants.py
checks that no other item of its ``run`` is lost); ``"never_hinted":
[causes]`` names likely causes its failures must not show (a hint whose
bug it is not), ``"hinted": [causes]`` causes they must all show; a cause
they name that the header does not declare (``hinted``, or ``"also_named"``:
a bug that gives the same outputs) is a wrong one and fails the meta-test.
``--causes`` counts, per profile, the mutants told their right cause.
``python -m tools.mutants`` (``nox -s mutants``) prints both columns per
spec item, lists survivors and the STRICT-only kills with their reasons; it
exits 1 if any mutant survives or is caught by STRICT alone without a reason.
Variants in tests/variants/ are the opposite check: correct-but-different
implementations that must pass every MUST test they run.
"""

import argparse
import ast
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from lmspec import ROOT
from lmspec.conformance.judge.forkserver import ForkServer
from lmspec.conformance.judge.launch import run_judge
from lmspec.conformance.options import Settings
from lmspec.conformance.target import resolve

MUTANTS_DIR = ROOT / "tests" / "mutants"
VARIANTS_DIR = ROOT / "tests" / "variants"
_BAD = ("failed", "error", "timeout")


class Entry(NamedTuple):
    path: Path
    meta: dict

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def run(self) -> list[str] | None:
        """The items it is graded on: its ``run``, else its ``spec`` item (None: every item)."""
        return self.meta.get("run") or ([self.meta["spec"]] if "spec" in self.meta else None)


def _header(path: Path, var: str) -> dict:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == var for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path}: no {var} = {{...}} header")


def discover(folder: Path = MUTANTS_DIR, var: str = "MUTANT") -> list[Entry]:
    return [Entry(p, _header(p, var)) for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")]


def sample(entries: list[Entry]) -> list[Entry]:
    """A small deterministic sample of a catalog, for the fast test suite:
    the first entry (by name) of each profile and spec section."""
    first: dict[tuple[str, str], Entry] = {}
    for entry in sorted(entries, key=lambda e: e.name):
        spec = entry.meta.get("spec") or (entry.meta.get("run") or ["?"])[0]
        first.setdefault((str(entry.meta.get("profile") or "cs336"), str(spec).split(".")[0]), entry)
    return sorted(first.values(), key=lambda e: e.name)


def meta_server() -> ForkServer:
    """A warm judge for lmspec's own catalog: it has also imported every profile's reference, which
    the catalog's adapters build on (used by judges run ``in_process``)."""
    from lmspec.conformance.profiles import all_profiles

    return ForkServer(preload=tuple(p.reference for p in all_profiles()))


def run_suite(
    adapter: Path | str,
    spec: list[str] | None,
    *,
    allow_reference: bool = True,
    jobs: int = 1,
    profile: str | None = None,
    server: ForkServer | None = None,
    in_process: bool = False,
) -> dict:
    """The judge's report for one adapter (or a minimal one saying why there is none); ``server``: the
    judge is forked from it (conformance/judge/forkserver.py) instead of started afresh;
    ``in_process``: the adapter, one of lmspec's own, runs inside the judge (``--in-process``: the same
    worker server, requests and replies encoded as over the pipe; no sandbox, no second process, no
    per-call time limit)."""
    settings = Settings(
        spec=",".join(spec) if spec else None,
        jobs=jobs,
        allow_reference=allow_reference,
        timeout=900.0,
        timeout_per_call=60.0,
        profile=profile,
        in_process=in_process,
    )
    with tempfile.TemporaryDirectory(prefix="lmspec-meta-") as tmp:
        run = run_judge(resolve(str(adapter), profile), settings, Path(tmp), server=server)
        log = run.log.read_text(errors="replace")[-4000:]
    report = run.report or {"tests": [], "problem": run.problem}
    report["output"] = log
    return report


def bad_tests(report: dict, *strengths: str) -> list[dict[str, Any]]:
    """Tests that did not pass; only those of the given strengths ("must",
    "strict", "should") if any are given."""
    tests = [t for t in report.get("tests") or [] if t.get("outcome") in _BAD]
    return [t for t in tests if not strengths or t.get("strength") in strengths]


class Outcome(NamedTuple):
    entry: Entry
    killed: bool  # by a MUST test: the score catches it
    strict_killed: bool  # by a test that is never scored (STRICT, SHOULD)
    detail: str
    seconds: float
    must_items: frozenset[str] = frozenset()  # items with a failed MUST test
    failures: tuple[str, ...] = ()  # the messages of the tests that did not pass

    @property
    def strict_only(self) -> bool:
        return self.strict_killed and not self.killed


def run_one(entry: Entry, server: ForkServer | None = None, in_process: bool = False) -> Outcome:
    start = time.perf_counter()
    report = run_suite(entry.path, entry.run, profile=entry.meta.get("profile"), server=server, in_process=in_process)
    if report.get("import_error") or report.get("problem"):
        why = report.get("import_error") or report.get("problem")
        return Outcome(entry, False, False, f"adapter did not load: {why}", time.perf_counter() - start)
    if not report.get("tests"):
        return Outcome(entry, False, False, "no tests ran:\n" + report["output"], time.perf_counter() - start)
    must, strict = bad_tests(report, "must"), bad_tests(report, "strict", "should")
    first = (must or strict or [None])[0]
    detail = f"{first['nodeid']}: {first['summary']}" if first else f"{len(report['tests'])} tests passed"
    items = frozenset(str(t.get("spec")) for t in must)
    messages = tuple(str(t.get("message") or t.get("summary") or "") for t in must + strict)
    return Outcome(entry, bool(must), bool(strict), detail, time.perf_counter() - start, items, messages)


def undeclared_causes(entry: Entry, outcome: Outcome) -> list[str]:
    """The causes the failures name that the mutant's header does not declare
    right (each must contain one of its ``hinted`` or ``also_named``)."""
    from lmspec.conformance.hints import named_causes  # torch: not on --help's path

    right = [*entry.meta.get("hinted", ()), *entry.meta.get("also_named", ())]
    named = {c for message in outcome.failures for c in named_causes(message)}
    return sorted(c for c in named if not any(r in c for r in right))


def cause_verdict(entry: Entry, outcome: Outcome) -> str:
    """``right`` (every declared cause shown, nothing else), ``wrong`` (a cause
    shown that the header does not declare) or ``none``."""
    if undeclared_causes(entry, outcome):
        return "wrong"
    hinted = entry.meta.get("hinted") or ()
    shown = hinted and all(any(h in m for m in outcome.failures) for h in hinted)
    return "right" if shown else "none"


def print_causes(outcomes: list[Outcome]) -> None:
    """Per profile: how many mutants are told their right cause, a wrong one, none (issue 31's measure)."""
    by_profile: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_profile[str(o.entry.meta.get("profile") or "cs336")].append(o)
    print(f"{'profile':8s} {'mutants':>8s} {'right':>6s} {'wrong':>6s} {'none':>6s}  right rate")
    for profile, group in sorted(by_profile.items()):
        verdicts = [cause_verdict(o.entry, o) for o in group]
        right = verdicts.count("right")
        print(
            f"{profile:8s} {len(group):8d} {right:6d} {verdicts.count('wrong'):6d} {verdicts.count('none'):6d}  "
            f"{right / len(group):5.0%}"
        )
    for o in outcomes:
        verdict = cause_verdict(o.entry, o)
        if verdict != "right":
            from lmspec.conformance.hints import named_causes

            named = sorted({c for m in o.failures for c in named_causes(m)})
            print(f"{verdict.upper():5s} {o.entry.name} ({o.entry.meta['bug']}): named {named or 'nothing'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmspec mutants", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="mutant file stems to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--causes", action="store_true", help="also print, per profile, how many are told their right likely cause"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run each mutant inside its judge (as the full catalog of nox -s meta does), not in a sandboxed worker",
    )
    args = parser.parse_args(argv)
    if not MUTANTS_DIR.is_dir():
        print(
            f"{parser.prog}: error: the mutant catalog ships only with a checkout of lmspec (its tests/mutants); "
            f"this is an installed copy ({ROOT}): run it from a checkout (git clone, then lmspec mutants there)",
            file=sys.stderr,
        )
        return 2
    if args.jobs < 1:
        print(f"{parser.prog}: error: --jobs {args.jobs}: expected a number of processes >= 1", file=sys.stderr)
        return 2
    found = discover()
    unknown = [n for n in args.names if n not in {e.name for e in found}]
    if unknown:
        print(
            f"{parser.prog}: error: no mutant named {', '.join(unknown)} in {MUTANTS_DIR} "
            "(expected file stems, e.g. nn_rope_half_split)",
            file=sys.stderr,
        )
        return 2
    entries = [e for e in found if not args.names or e.name in args.names]
    local, servers = threading.local(), []

    def one(entry: Entry) -> Outcome:  # each thread forks its judges from a warm judge of its own
        if not hasattr(local, "server"):
            local.server = meta_server()
            servers.append(local.server)
        return run_one(entry, local.server, args.in_process)

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(one, entries))
    finally:
        for server in servers:
            server.close()
    by_section: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_section[o.entry.meta["spec"]].append(o)
    print(f"{'spec item':24s} {'scored':>7s} {'unscored':>9s} {'total':>6s}  scored rate")
    print(f"{'':24s} {'(MUST)':>7s} {'only':>9s}   (unscored: STRICT rules and SHOULD items)")
    for section in sorted(by_section):
        group = by_section[section]
        k = sum(o.killed for o in group)
        s = sum(o.strict_only for o in group)
        print(f"{section:24s} {k:7d} {s:9d} {len(group):6d}  {k / len(group):5.0%}")
    killed = sum(o.killed for o in outcomes)
    strict_only = [o for o in outcomes if o.strict_only]
    print(f"{'TOTAL':24s} {killed:7d} {len(strict_only):9d} {len(outcomes):6d}  {killed / max(1, len(outcomes)):5.0%}")
    unexplained = []
    for o in strict_only:
        why = o.entry.meta.get("strict_only")
        print(f"UNSCORED ONLY {o.entry.name} ({o.entry.meta['bug']}): {why or 'NO REASON GIVEN'}")
        if not why:
            unexplained.append(o)
    if args.causes:
        print_causes(outcomes)
    survivors = [o for o in outcomes if not o.killed and not o.strict_killed]
    for o in survivors:
        print(f"SURVIVOR {o.entry.name} ({o.entry.meta['spec']}: {o.entry.meta['bug']}): {o.detail}")
    return 1 if survivors or unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
