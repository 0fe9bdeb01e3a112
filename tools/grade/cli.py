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
import signal
import sys
import threading
import traceback
import typing
from pathlib import Path
from typing import Any

from lmspec.conformance import options, profiles
from lmspec.conformance.judge.launch import Progress
from lmspec.conformance.plain import plain
from lmspec.conformance.target import Target, TargetError, resolve
from lmspec.tools.grade.batch import find_submissions, grade_batch
from lmspec.tools.grade.grading import NotGraded, grade
from lmspec.tools.grade.outputs import FILES, OutError, claim_batch_out, claim_out, write_outputs, write_spec_page
from lmspec.tools.grade.points import PointsFileError, PointsTable, load_points
from lmspec.tools.grade.report import render_table, render_timings
from lmspec.tools.grade.results import parse_chapters

FORMATS = ("table", "json", "junit", "gradescope", "html")


class UsageError(Exception):
    """Bad arguments (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one line (no usage block): ``lmspec grade: error: ...``."""

    def error(self, message: str) -> "typing.NoReturn":
        raise UsageError(message.replace("argument ", "", 1) if message.startswith("argument ") else message)


def usage_line(prog: str, message: str) -> str:
    """One line per mistake: what was given, what is accepted, where the help
    is; made plain (a path given may be a submission's hostile file name)."""
    return plain(f"{prog}: error: {message} (see {prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    """The grader's command line: TARGET and the options of conformance/options.py."""
    p = _Parser(
        prog="lmspec grade",
        description="Grade an implementation with the lmspec conformance suite: a CS336 repository "
        "(its tests/adapters.py), an adapters file, a reader's module, notebook or folder of chapters (gpt2), or an "
        "importable module; "
        "without one, lmspec's reference.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    p.add_argument(
        "target",
        nargs="?",
        default=None,
        help="a repository folder, an adapters file, a notebook, a folder of chapters or a module (default: lmspec's "
        "reference)",
    )
    options.add_to_argparse(p, options.GRADE)
    return p


def _formats(args: argparse.Namespace) -> list[str]:
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UsageError(
            f"--format {args.format}: unknown {', '.join(unknown)}; expected a comma list of {', '.join(FORMATS)}"
        )
    return formats


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("timeout_per_call", "timeout", "startup_timeout"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} {getattr(args, name):g}: expected a number of seconds > 0")
    if args.memory_limit < 0:
        raise UsageError(f"--memory-limit {args.memory_limit:g}: expected a number of GB >= 0 (0: no limit)")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a number of judge processes >= 1")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: expected a number of Dask workers >= 1")
    if args.workers is not None and args.scheduler:
        raise UsageError("--workers goes without --scheduler (the cluster at --scheduler has its own workers)")


def _check_profile(args: argparse.Namespace) -> None:
    if args.profile is not None and args.profile not in profiles.NAMES:
        raise UsageError(f"--profile {args.profile}: unknown profile; expected one of {', '.join(profiles.NAMES)}")


def _check_spec(args: argparse.Namespace, target: Target | None) -> None:
    """Every --spec selector names an item of what is graded (the target's
    profile when it is known before the grading; any profile's otherwise):
    an id, a prefix, or a name the item is known by (tools/grade/select.py),
    which becomes the ids it selects."""
    if not args.spec:
        return
    from lmspec.tools.grade.select import expand

    known = target is not None and target.detected_by != "star-import"
    chosen = [profiles.get(target.profile)] if known else list(profiles.all_profiles())  # type: ignore[union-attr]
    ids = [i.id for p in chosen for i in p.items]
    whose = f" of profile {chosen[0].name}" if known else ""
    args.spec, unknown = expand(args.spec, chosen)
    for sel in unknown:
        sections = sorted({i.partition(".")[0] for i in ids})
        raise UsageError(
            f"--spec {sel}: matches no spec item{whose}; expected item ids or their prefixes, or the name of an "
            f"adapter function or of the book's or the notes' classes, comma-separated "
            f"(sections {', '.join(sections)}; every id: lmspec spec --list)"
        )


def _check_batch(args: argparse.Namespace) -> None:
    if not args.batch and (args.workers or args.scheduler or args.regrade):
        raise UsageError("--workers, --scheduler and --regrade go with --batch")
    if not args.batch:
        return
    if args.adapter:
        raise UsageError("give --adapter or --batch, not both")
    if not Path(args.batch).is_dir():
        raise UsageError(f"--batch {args.batch}: not a folder")
    if not find_submissions(Path(args.batch)):
        raise UsageError(f"--batch {args.batch}: no submission folders or *.py adapters files in it")
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"--batch needs Dask distributed: pip install 'lmspec[batch]' ({exc})") from exc


def _check_environment(args: argparse.Namespace) -> None:
    if args.sandbox == "bwrap":
        from lmspec.conformance.judge.sandbox import bwrap_problem

        problem = bwrap_problem()
        if problem is not None:
            raise UsageError(f"--sandbox bwrap: {problem}")
    if args.fixtures:
        from lmspec.conformance.fixtures import folder_problem

        problem = folder_problem(args.fixtures)
        if problem is not None:
            raise UsageError(problem)
    for path in args.suite or []:
        if not Path(path).exists():
            raise UsageError(f"--suite {path}: not found")


def _check_args(args: argparse.Namespace) -> tuple[list[str], PointsTable, Target | None]:
    """The formats, the points table and the target (None with --batch); UsageError on a mistake."""
    formats = _formats(args)
    _check_numbers(args)
    _check_profile(args)
    if args.target and args.adapter:
        raise UsageError("give TARGET or --adapter, not both")
    args.adapter = args.adapter or args.target
    _check_batch(args)
    try:
        parse_chapters(args.chapters)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    _check_environment(args)
    target = None
    if not args.batch:
        try:
            target = resolve(args.adapter, args.profile, python=args.python)
        except (TargetError, ValueError) as exc:
            raise UsageError(str(exc)) from exc
    _check_spec(args, target)
    if args.watch:
        from lmspec.tools.grade.watch import watched_folder

        if args.batch:
            raise UsageError("--watch goes without --batch (it re-grades one submission)")
        if target is not None and watched_folder(target) is None:
            raise UsageError(f"--watch {target.given}: a module name has no files to watch; give its folder or file")
    try:
        points = load_points(args.points, target.profile if target else args.profile)
    except PointsFileError as exc:
        raise UsageError(str(exc)) from exc
    try:
        if target is not None:
            claim_out(Path(args.out), target.root)
        elif args.batch:
            claim_batch_out(Path(args.out), Path(args.batch))
    except OutError as exc:
        raise UsageError(str(exc)) from exc
    return formats, points, target


class _ProgressDisplay:
    """A tqdm bar on a terminal; elsewhere (a log file, CI) one line per
    phase: when the tests start, and when they are done. "failed": tests
    that failed, errored or timed out, scored and STRICT, as in the table."""

    def __init__(self, label: str, enabled: bool):
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.bar = None
        self.label = label
        self.last: Progress | None = None

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
            self.bar.set_postfix_str(f"{p.failures} failed", refresh=False)
            self.bar.refresh()
        elif self.last is None:
            total = f"{p.total} tests" if p.total else "the tests"
            print(f"{self.label}: running {total}", file=sys.stderr, flush=True)
        self.last = p

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.last is not None:
            p = self.last
            print(f"{self.label}: {p.done}/{p.total or p.done} tests done, {p.failures} failed", file=sys.stderr)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        # SIGTERM and SIGHUP end the grading as Ctrl-C does: the judge and its workers are ended first
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _interrupt)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        formats, points, target = _check_args(args)
    except UsageError as exc:
        print(usage_line(parser.prog, str(exc)), file=sys.stderr)
        return 2
    try:
        if args.batch:
            settings = options.from_namespace(args).replace(jobs=args.jobs or 1)
            return grade_batch(
                Path(args.batch),
                out=Path(args.out),
                settings=settings,
                points=points,
                formats=tuple(f for f in formats if f != "table"),
            )
        return _grade_one(args, target, formats, points)
    except NotGraded as exc:
        print(plain(f"{parser.prog}: not graded: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grader interrupted", file=sys.stderr)
        return 2
    except Exception:
        print(plain(traceback.format_exc()), file=sys.stderr, end="")
        print("the grader itself failed (exit status 2)", file=sys.stderr)
        return 2


def _watch(args: argparse.Namespace, target: Any, formats: list[str], points: PointsTable) -> int:
    from lmspec.tools.grade.watch import watch

    # one judge process: a re-grade of a few items is mostly start-up, which more processes only multiply
    settings = options.from_namespace(args).replace(jobs=args.jobs or 1)
    out = Path(args.out)

    def run() -> Any:
        report = grade(target, out=out, settings=settings, points=points)
        write_outputs(report, out, tuple(f for f in formats if f != "table"), points)
        return report

    return watch(target, run, out=out)


def _grade_one(args: argparse.Namespace, target: Any, formats: list[str], points: PointsTable) -> int:
    if args.watch:
        return _watch(args, target, formats, points)
    settings = options.from_namespace(args).replace(jobs=args.jobs or min(os.cpu_count() or 1, 4))
    display = _ProgressDisplay("grading", enabled=not args.quiet)
    try:
        report = grade(target, out=Path(args.out), settings=settings, points=points, progress=display)
    finally:
        display.close()
    out = Path(args.out)
    write_outputs(report, out, tuple(formats), points)
    if "html" in formats:
        write_spec_page(out)
    written = tuple(out / FILES[f] for f in ("json", "html") if f in formats)
    if "table" in formats and not args.quiet:
        print(render_table(report, color=sys.stdout.isatty(), files=written))
    if args.timings:
        print(render_timings(report))
        if "table" not in formats or args.quiet:
            print(plain("\n".join(f"  {path}" for path in written)))
    return 0 if report.passed else 1
