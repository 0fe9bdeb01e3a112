"""Command line of the grader: ``lmspec grade`` (also ``python -m tools.grade``, ``nox -s grade``).

Exit status: 0 when every required (core) item passes, or the score reaches
``--fail-under``; 1 otherwise (including a submission that fails to import, a
compromised run, or, with --batch, any submission that does not pass); 2 when
the grader itself could not run (bad arguments, its own crash).

--jobs N is the number of judge processes (pytest-xdist) grading ONE
submission, each with its sandboxed worker: default min(cores, 4) for one
submission, 1 in a batch. A batch grades --workers submissions at once (one
single-threaded Dask worker each; default: the machine's cores), so it runs
about workers x jobs judge processes; docs/course.md.
"""

import argparse
import os
import sys
import traceback
from pathlib import Path

from lmspec.conformance.spec_items import ITEMS
from lmspec.tools.grade.batch import find_adapter, find_submissions, grade_batch
from lmspec.tools.grade.grading import NotGraded, grade
from lmspec.tools.grade.judge import DEFAULT_SUITE, JudgeOptions, Progress
from lmspec.tools.grade.outputs import write_outputs, write_spec_page
from lmspec.tools.grade.points import PointsFileError, PointsTable, load_points
from lmspec.tools.grade.report import render_table, render_timings

FORMATS = ("table", "json", "junit", "gradescope", "html")


class UsageError(Exception):
    """Bad arguments (exit status 2)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lmspec grade",
        description="Grade an implementation with the lmspec conformance suite: a CS336 repository "
        "(its tests/adapters.py), an adapters file, or an importable module; without one, lmspec's reference.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    p.add_argument(
        "target",
        nargs="?",
        default=None,
        help="a repository folder, an adapters file or a module (default: lmspec's reference)",
    )
    p.add_argument("--adapter", default=None, help="the same as TARGET (kept for scripts)")
    p.add_argument("--out", default="grade-out", metavar="DIR", help="output folder (default ./grade-out)")
    p.add_argument(
        "--format",
        default="table,json,junit,gradescope,html",
        help="comma list of " + ",".join(FORMATS) + " (html: report.html, and spec.html beside it)",
    )
    p.add_argument("--spec", default=None, metavar="IDS", help="only these spec ids (comma list, prefix match)")
    p.add_argument(
        "--timeout-per-call",
        type=float,
        default=60.0,
        metavar="S",
        help="a call into the submission without an answer after S s kills its worker; "
        "that function is not called again (60)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        metavar="S",
        help="overall limit per submission (1800)",
    )
    p.add_argument(
        "--startup-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="limit to import the submission (120)",
    )
    p.add_argument(
        "--memory-limit",
        type=float,
        default=4.0,
        metavar="GB",
        help="address space of the submission's process (4; 0: none)",
    )
    p.add_argument(
        "--fail-under",
        type=float,
        default=None,
        metavar="PCT",
        help="exit 0 when score >= PCT %% of max",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="judge processes grading one submission, each with its sandboxed worker "
        "(default: min(cores, 4); in a batch 1 per submission, see --workers)",
    )
    p.add_argument("--hypothesis-profile", default="ci", metavar="P", help="dev, ci (default) or thorough")
    p.add_argument(
        "--points",
        default=None,
        metavar="FILE",
        help="JSON points table (see tools/grade/points.py)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda", "all", "auto"],
        help="devices to test (cpu)",
    )
    p.add_argument(
        "--suite",
        action="append",
        default=None,
        metavar="PATH",
        help="test paths (default conformance/)",
    )
    p.add_argument(
        "--sandbox",
        default="auto",
        choices=["auto", "bwrap", "none"],
        help="isolation of the submission: bubblewrap, none, or auto (bubblewrap when it works, "
        "else none with a loud warning)",
    )
    p.add_argument(
        "--allow-reference",
        action="store_true",
        help="make lmspec's reference importable by the submission (lmspec's own mutants and variants "
        "build on it); never for grading students",
    )
    p.add_argument(
        "--env",
        default="none",
        choices=["none", "auto"],
        help="auto: give each submission an environment of its own with its declared dependencies "
        "(reusing the grader's torch; cached); none: the grader's environment as it is",
    )
    p.add_argument("--env-cache", default=None, metavar="DIR", help="where --env auto keeps environments")
    p.add_argument("--python", default=None, metavar="PATH", help="the interpreter that runs the submission")
    p.add_argument(
        "--fixtures",
        default=None,
        metavar="DIR",
        help="the official CS336 fixture files (else LMSPEC_FIXTURES, the graded repository's "
        "tests/fixtures, ../shared/fixtures)",
    )
    # --- a whole course: --batch on Dask distributed (tools/grade/batch.py, docs/course.md)
    batch = p.add_argument_group("batch (a whole course, on Dask distributed: pip install 'lmspec[batch]')")
    batch.add_argument(
        "--batch",
        default=None,
        metavar="DIR",
        help="grade every submission in DIR (its folders and its *.py adapters files), one Dask task each; "
        "writes per submission results under --out/NAME/, then summary.csv and dashboard.html",
    )
    batch.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="size of the local Dask cluster: N single-threaded worker processes (default: the machine's cores)",
    )
    batch.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="use the Dask cluster at ADDRESS (tcp://host:8786) instead of a local one",
    )
    batch.add_argument(
        "--regrade",
        action="store_true",
        help="grade again the submissions whose results under --out are for the same content and settings",
    )
    p.add_argument("--timings", action="store_true", help="print where the grading's time went (also in results.json)")
    p.add_argument("--quiet", action="store_true", help="no progress display and no table")
    return p


def _check_args(args: argparse.Namespace) -> tuple[list[str], PointsTable]:
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UsageError(f"--format: unknown {', '.join(unknown)} (choose from {', '.join(FORMATS)})")
    if args.spec:
        ids = [i.id for i in ITEMS]
        for sel in (s.strip() for s in args.spec.split(",") if s.strip()):
            if not any(i == sel or i.startswith(sel + ".") for i in ids):
                raise UsageError(f"--spec: {sel!r} matches no spec id (see conformance/spec_items.py)")
    for name in ("timeout_per_call", "timeout", "startup_timeout"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be > 0")
    if args.memory_limit < 0 or (args.jobs is not None and args.jobs < 1):
        raise UsageError("--memory-limit must be >= 0 and --jobs >= 1")
    if not args.batch and (args.workers or args.scheduler or args.regrade):
        raise UsageError("--workers, --scheduler and --regrade go with --batch")
    if args.workers is not None and (args.workers < 1 or args.scheduler):
        raise UsageError("--workers must be >= 1, and not with --scheduler (the cluster has its own workers)")
    if args.target and args.adapter:
        raise UsageError("give TARGET or --adapter, not both")
    args.adapter = args.adapter or args.target
    if args.adapter and Path(args.adapter).is_dir():
        found = find_adapter(Path(args.adapter))
        if found is None:
            raise UsageError(f"{args.adapter}: no tests/adapters.py or adapters.py in this folder (or one below)")
        args.adapter = str(found)
    if args.adapter and args.batch:
        raise UsageError("give --adapter or --batch, not both")
    if args.batch and not Path(args.batch).is_dir():
        raise UsageError(f"--batch {args.batch}: not a folder")
    if args.batch and not find_submissions(Path(args.batch)):
        raise UsageError(f"--batch {args.batch}: no submission folders or *.py adapters files in it")
    if args.batch:
        try:
            import distributed  # noqa: F401
        except ImportError as exc:
            raise UsageError(f"--batch needs Dask distributed: pip install 'lmspec[batch]' ({exc})") from exc
    if args.sandbox == "bwrap":
        from lmspec.conformance.sandbox import bwrap_problem

        problem = bwrap_problem()
        if problem is not None:
            raise UsageError(f"--sandbox bwrap: {problem}")
    for path in args.suite or []:
        if not Path(path).exists():
            raise UsageError(f"--suite {path}: not found")
    try:
        points = load_points(args.points)
    except PointsFileError as exc:
        raise UsageError(str(exc)) from exc
    return formats, points


class _ProgressDisplay:
    """tqdm on a terminal; otherwise a line every 10% on stderr."""

    def __init__(self, label: str, enabled: bool):
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.bar = None
        self.label = label
        self.last_decile = -1

    def __call__(self, p: Progress) -> None:
        if not self.enabled:
            return
        if self.tty:
            if self.bar is None:
                from tqdm import tqdm

                self.bar = tqdm(total=p.total, desc=self.label, unit="test", file=sys.stderr, leave=False)
            if p.total and self.bar.total != p.total:
                self.bar.total = p.total
            self.bar.n = p.done
            self.bar.set_postfix_str(f"{p.failures} not passed", refresh=False)
            self.bar.refresh()
        elif p.total:
            decile = 10 * p.done // p.total
            if decile != self.last_decile:
                self.last_decile = decile
                print(
                    f"{self.label}: {p.done}/{p.total} tests, {p.failures} not passed",
                    file=sys.stderr,
                )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _options(args: argparse.Namespace, jobs: int) -> JudgeOptions:
    return JudgeOptions(
        call_timeout_s=args.timeout_per_call,
        startup_timeout_s=args.startup_timeout,
        total_timeout_s=args.timeout,
        memory_gb=args.memory_limit or None,
        jobs=jobs,
        profile=args.hypothesis_profile,
        device=args.device,
        sandbox=args.sandbox,
        spec=args.spec,
        suite=tuple(args.suite) if args.suite else DEFAULT_SUITE,
        allow_reference=args.allow_reference,
        python=args.python,
        fixtures=args.fixtures,
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on bad arguments
    try:
        formats, points = _check_args(args)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    try:
        if args.batch:
            return grade_batch(
                Path(args.batch),
                out=Path(args.out),
                options=_options(args, jobs=args.jobs or 1),
                quiet=args.quiet,
                formats=tuple(f for f in formats if f != "table"),
                points=points,
                fail_under=args.fail_under,
                env=args.env,
                env_cache=args.env_cache,
                workers=args.workers,
                scheduler=args.scheduler,
                regrade=args.regrade,
            )
        adapter = args.adapter or "lmspec.reference.adapter"
        jobs = args.jobs or min(cores, 4)
        display = _ProgressDisplay("grading", enabled=not args.quiet)
        try:
            report = grade(
                adapter,
                out=Path(args.out),
                options=_options(args, jobs),
                formats=(),  # written below, with the course's Gradescope settings and the HTML report
                progress=display,
                points=points,
                fail_under=args.fail_under,
                env=args.env,
                env_cache=args.env_cache,
            )
        finally:
            display.close()
        write_outputs(report, Path(args.out), tuple(formats), points)
        if "html" in formats:
            write_spec_page(Path(args.out))
        if "table" in formats and not args.quiet:
            print(render_table(report, color=sys.stdout.isatty()))
        if args.timings:
            print(render_timings(report))
            print(f"  results: {Path(args.out) / 'results.json'}")
        return 0 if report.passed else 1
    except NotGraded as exc:
        print(f"{parser.prog}: not graded: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grader interrupted", file=sys.stderr)
        return 2
    except Exception:
        traceback.print_exc()
        print("the grader itself failed (exit status 2)", file=sys.stderr)
        return 2
