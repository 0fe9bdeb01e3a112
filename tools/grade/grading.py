"""Grade one implementation: resolve what is graded (a Target), give its
worker an interpreter and environment, guard the suite's files, run the judge
(conformance/judge/launch.py), and score its report (tools.grade.results).
The files are written by tools.grade.outputs."""

import datetime as _dt
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmspec.conformance.judge.launch import JudgeRun, judge_processes, run_judge, suite_paths
from lmspec.conformance.judge.sandbox import Sandbox
from lmspec.conformance.judge.sandbox import resolve as resolve_sandbox
from lmspec.conformance.plain import plain_object
from lmspec.conformance.target import Target, resolve
from lmspec.tools.grade import envs, pythons
from lmspec.tools.grade.files import diff_digests, tree_digest, verify_manifest
from lmspec.tools.grade.points import PointsTable
from lmspec.tools.grade.repository import Repository, inspect
from lmspec.tools.grade.results import GradeReport, build_report, error_report, load_error, parse_chapters, timings


class NotGraded(RuntimeError):
    """The grader, as it is set up, cannot grade (a --python that does not run,
    or lacks what lmspec's worker needs): exit status 2. Whatever is wrong with
    the submission itself is its error instead (results.json, exit status 1)."""


@dataclass
class Prepared:
    """The target with its worker's interpreter and environment, what the
    grader knows of its repository, and what the report must say."""

    target: Target
    repo: Repository | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # the submission's error: nothing was run, every item is an error
    choice: pythons.Choice | None = None


def with_environment(target: Target, settings: Any, log: Any = None) -> Prepared:
    """The target with its worker's interpreter (and environment, with
    ``--env auto``); NotGraded only for the grader's own setup."""
    if target.problem:
        return Prepared(target, error=f"not graded: {target.problem}")
    if target.root is None:
        return Prepared(target.with_(python=settings.python))
    repo = inspect(target.root)
    warnings = [f"the repository: {p}" for p in repo.problems]
    try:
        choice = pythons.choose(repo, settings.python)
        warnings += [w for w in (choice.warning, choice.note) if w]
        if settings.env == "auto":
            if repo.pyproject_error:
                error = f"its environment cannot be built (--env auto): {repo.pyproject_error}"
                return Prepared(target, repo, warnings, error, choice)
            sandbox_kind, _ = resolve_sandbox(settings.sandbox)
            try:
                built = envs.prepare(
                    repo,
                    choice.python,
                    envs.cache_root(settings.env_cache),
                    bwrap=sandbox_kind is Sandbox.BWRAP,
                    memory_gb=settings.memory_limit or None,
                    seconds=settings.timeout,
                    log=log,
                )
            except envs.EnvError as exc:
                return Prepared(target, repo, warnings, f"its environment could not be built (--env auto): {exc}")
            if sandbox_kind is not Sandbox.BWRAP and not built.report.get("cached"):
                warnings.append("its environment was built WITHOUT a sandbox: its build code ran with your rights")
            return Prepared(target.with_(python=built.python, environment=built.report), repo, warnings, None, choice)
        if choice.python != sys.executable:
            found = envs.probe(choice.python)
            if found["missing"]:
                raise NotGraded(
                    f"--python {choice.python} (Python {found['version']}) lacks {', '.join(found['missing'])}, "
                    "which lmspec's worker needs there; install them in that interpreter, or use --env auto"
                )
        python = None if choice.python == sys.executable else choice.python
        return Prepared(target.with_(python=python), repo, warnings, None, choice)
    except envs.InterpreterError as exc:
        raise NotGraded(str(exc)) from exc


def explain_error(report: GradeReport, prepared: Prepared, settings: Any) -> None:
    """Make the report's error say why, when the grader knows more than the
    worker: an interpreter older than requires-python (the exact reason and
    the fix), or a declared dependency missing from the environment."""
    repo, choice = prepared.repo, prepared.choice
    if report.error is None or repo is None:
        return
    if choice is not None and choice.mismatch:
        named = re.search(r"No module named '([\w.]+)'", report.error)
        declared = _declared(repo, named.group(1).partition(".")[0]) if named and settings.env != "auto" else None
        reason = pythons.explain_import_failure(report.implementation.get("import_error"), repo, choice, declared)
        if reason:
            report.error = reason
            return
    missing = re.search(r"No module named '([\w.]+)'", report.error)
    if missing is None:
        return
    module = missing.group(1).partition(".")[0]
    declared = _declared(repo, module)
    if declared is None:
        return
    if settings.env == "auto":
        report.error += (
            f" ({module} is declared in the repository ({declared}) but its environment could not install it: see "
            "implementation.environment.notes)"
        )
    else:
        report.error += (
            f" ({module} is declared in the repository's pyproject.toml or requirements.txt as {declared!r}; the "
            "grader's environment lacks it: --env auto installs it in an environment of the submission's own)"
        )


def explain_placeholders(report: GradeReport, prepared: Prepared, settings: Any) -> None:
    """A module bound to a placeholder that the repository declares: how to
    get it installed, the likeliest way first (a warning)."""
    placeholders = (report.implementation.get("intake") or {}).get("placeholders") or {}
    if not placeholders or prepared.repo is None:
        return
    choice = prepared.choice
    for module in placeholders:
        declared = _declared(prepared.repo, str(module))
        if declared is None:
            continue
        if settings.env == "auto":
            report.warnings.append(
                f"{module} is declared in the repository ({declared}) but its environment could not install it: "
                "see implementation.environment.notes"
            )
            continue
        ways = ["--env auto installs it in an environment of the submission's own"]
        if choice is not None and choice.mismatch:
            ways.append("or --python PATH names an interpreter that has it")
        report.warnings.append(
            f"{module} is declared in the repository's pyproject.toml or requirements.txt as {declared!r} but is "
            f"not installed where lmspec ran (the items that use it fail): {', '.join(ways)}"
        )


def _declared(repo: Repository, module: str) -> str | None:
    """The declared requirement that provides ``module`` (by name), if any."""
    from packaging.requirements import InvalidRequirement, Requirement

    wanted = re.sub(r"[-_.]+", "_", module).lower()
    for text in repo.dependencies:
        try:
            name = Requirement(text).name
        except InvalidRequirement:
            continue
        if re.sub(r"[-_.]+", "_", name).lower() in (wanted, f"py{wanted}", f"python_{wanted}"):
            return text
    return None


def syntax_error(target: Target) -> dict[str, Any] | None:
    """The adapters file's syntax error, found without running anything
    (``compile`` only parses), when the worker runs on the grader's own
    interpreter (another version may accept other syntax): the import error
    the worker would report, so that no suite that can only fail is run."""
    if not target.is_file or target.problem or target.python not in (None, sys.executable):
        return None
    path = Path(target.adapter)
    try:
        if path.stat().st_size > 4 << 20:
            return None
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return {"type": type(exc).__name__, "file": str(path), "line": exc.lineno, "message": exc.msg}
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    return None


def _guarded_run(target: Target, settings: Any, out: Path, progress: Any) -> tuple[JudgeRun, list[str]]:
    """Run the judge, with the suite's files checked before and after: under
    bubblewrap the submission cannot see them at all; without it, a change
    of them during grading is evidence of tampering (the compromise reasons)."""
    digest_before = tree_digest()
    manifest_before = verify_manifest() or []
    run = run_judge(target, settings, out / "logs", progress)
    manifest_after = verify_manifest() or []
    unsandboxed = (run.report or {}).get("sandbox") != "bwrap"
    changes = diff_digests(digest_before, tree_digest()) if unsandboxed else []
    compromised = [f"the suite's files changed during grading (by the submission?): {c}" for c in changes]
    compromised += [f"snapshots/MANIFEST check failed before grading: {p}" for p in manifest_before]
    compromised += [
        f"snapshots/MANIFEST check failed after grading: {p}" for p in manifest_after if p not in manifest_before
    ]
    return run, compromised


def _hide_out(target: Target, out: Path) -> Target:
    """An output folder inside the submission (``cd repo && lmspec grade .``)
    is covered in the worker's sandbox: the judge's logs are not the worker's to read."""
    if target.root is None or not out.resolve().is_relative_to(target.root.resolve()):
        return target
    return target.with_(hidden=(str(target.root / out.resolve().relative_to(target.root.resolve())),))


def recorded_settings(settings: Any, target: Target, points: PointsTable) -> dict[str, Any]:
    """The settings results.json records."""
    return {
        "profile": target.profile,
        "spec": settings.spec,
        "timeout_per_call_s": settings.timeout_per_call,
        "timeout_s": settings.timeout,
        "memory_limit_gb": settings.memory_limit or None,
        "jobs": judge_processes(settings, target),
        "hypothesis_profile": settings.hypothesis_profile,
        "device": settings.device,
        "sandbox": settings.sandbox,
        "env": settings.env,
        "python": target.python or sys.executable,
        "suite": [os.path.relpath(s) for s in suite_paths(settings, target)],
        "fail_under": settings.fail_under,
        "chapters": sorted(parse_chapters(settings.chapters), key=int),
        "partial_credit": points.partial_credit,
    }


def grade(
    given: str | Target | None, *, out: Path, settings: Any, points: PointsTable | None = None, progress: Any = None
) -> GradeReport:
    """Grade one implementation; ``given`` as the user gave it (or a Target
    already resolved). The report, every string of it made plain (its paths
    and names are the submission's: conformance/plain.py); the caller writes
    the files."""
    return plain_object(_grade(given, out=out, settings=settings, points=points, progress=progress))


def _grade(
    given: str | Target | None, *, out: Path, settings: Any, points: PointsTable | None, progress: Any
) -> GradeReport:
    points = points or PointsTable.default(settings.profile)
    out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.UTC)
    target = given if isinstance(given, Target) else resolve(given, settings.profile, python=settings.python)
    target = _hide_out(target, out)
    prepared = with_environment(target, settings)
    target = prepared.target
    broken = syntax_error(target) if prepared.error is None else None
    if broken is not None:
        prepared.error = load_error({"import_error": broken})
    if prepared.error is not None:
        report = error_report(
            prepared.error,
            points=points,
            target=target,
            started=started,
            duration_s=(_dt.datetime.now(_dt.UTC) - started).total_seconds(),
            settings=recorded_settings(settings, target, points),
            spec=settings.spec,
            sandbox=str(resolve_sandbox(settings.sandbox)[0]),
            warnings=prepared.warnings,
        )
        report.implementation["repository"] = prepared.repo.to_json() if prepared.repo is not None else None
        report.implementation["import_error"] = broken
        explain_error(report, prepared, settings)
        return report
    if target.detected_by == "star-import":  # names a static read cannot tell: a worker says
        # the session speaks the wire format (torch, numpy): imported only here, so that the grader's
        # own process never imports torch otherwise (4 CPU-seconds of a grading; tests/test_lmspec_help.py)
        from lmspec.conformance.session import probe_profile

        target = probe_profile(target, settings)
    # --timeout bounds the whole grading: what building the environment took is not the judge's
    left = settings.timeout - (_dt.datetime.now(_dt.UTC) - started).total_seconds()
    run, compromised = _guarded_run(target, settings.replace(timeout=max(left, 1.0)), out, progress)
    warnings = list(prepared.warnings)
    if run.timed_out:
        warnings.append(f"the overall time limit (--timeout {settings.timeout:g} s) ran out: results are partial")
    report = build_report(
        run.report or {},
        points=points,
        target=target,
        started=started,
        duration_s=run.seconds,
        settings=recorded_settings(settings, target, points),
        extra_compromised=compromised,
        extra_warnings=warnings,
        run_error=run.problem,
        fail_under=settings.fail_under,
        chapters=parse_chapters(settings.chapters),
    )
    explain_error(report, prepared, settings)
    explain_placeholders(report, prepared, settings)
    report.timings = timings(run.report or {}, run.started_at, (_dt.datetime.now(_dt.UTC) - started).total_seconds())
    report.implementation["repository"] = prepared.repo.to_json() if prepared.repo is not None else None
    report.implementation["environment"] = target.environment
    report.implementation["fixtures"] = (run.report or {}).get("fixtures")
    return report
