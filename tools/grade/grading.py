"""Grade one implementation: resolve what is graded (a Target), give its
worker an interpreter and environment, guard the suite's files, run the judge
(conformance/judge/launch.py), and score its report (tools.grade.results).
The files are written by tools.grade.outputs."""

import datetime as _dt
import os
import platform
import sys
from pathlib import Path
from typing import Any

from lmspec.conformance.judge.launch import JudgeRun, run_judge, suite_paths
from lmspec.conformance.session import probe_profile
from lmspec.conformance.target import Target, resolve
from lmspec.tools.grade import envs
from lmspec.tools.grade.files import diff_digests, tree_digest, verify_manifest
from lmspec.tools.grade.points import PointsTable
from lmspec.tools.grade.repository import inspect, python_problem
from lmspec.tools.grade.results import GradeReport, build_report, timings


class NotGraded(RuntimeError):
    """The submission cannot be graded as the grader is set up (a Python it
    does not run on, an environment that cannot be built): exit status 2."""


def with_environment(target: Target, settings: Any, log: Any = None) -> tuple[Target, Any]:
    """The target with its worker's interpreter (and environment, with
    ``--env auto``), and what the grader knows of its repository; raises
    NotGraded with what to do."""
    if target.root is None:
        return target.with_(python=settings.python), None
    repo = inspect(target.root)
    python = settings.python or sys.executable
    version = platform.python_version() if python == sys.executable else None
    try:
        if settings.env == "auto":
            built = envs.prepare(repo, python, envs.cache_root(settings.env_cache), log)
            problem = python_problem(repo, built.report["python_version"], python)
            if problem:
                raise NotGraded(problem)
            return target.with_(python=built.python, environment=built.report), repo
        if version is None:
            found = envs.probe(python)
            if found["missing"]:
                raise NotGraded(
                    f"--python {python} (Python {found['version']}) lacks {', '.join(found['missing'])}, which "
                    "lmspec's worker needs there; install them in that interpreter, or use --env auto"
                )
            version = found["version"]
    except envs.EnvError as exc:
        raise NotGraded(str(exc)) from exc
    problem = python_problem(repo, version, python)
    if problem:
        raise NotGraded(problem)
    return target.with_(python=settings.python), repo


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


def recorded_settings(settings: Any, target: Target, points: PointsTable) -> dict[str, Any]:
    """The settings results.json records."""
    return {
        "profile": target.profile,
        "spec": settings.spec,
        "timeout_per_call_s": settings.timeout_per_call,
        "timeout_s": settings.timeout,
        "memory_limit_gb": settings.memory_limit or None,
        "jobs": settings.jobs,
        "hypothesis_profile": settings.hypothesis_profile,
        "device": settings.device,
        "sandbox": settings.sandbox,
        "env": settings.env,
        "python": target.python or sys.executable,
        "suite": [os.path.relpath(s) for s in suite_paths(settings, target)],
        "fail_under": settings.fail_under,
        "partial_credit": points.partial_credit,
    }


def grade(
    given: str | Target | None, *, out: Path, settings: Any, points: PointsTable | None = None, progress: Any = None
) -> GradeReport:
    """Grade one implementation; ``given`` as the user gave it (or a Target
    already resolved). The report; the caller writes the files."""
    points = points or PointsTable.default(settings.profile)
    out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.UTC)
    target = given if isinstance(given, Target) else resolve(given, settings.profile, python=settings.python)
    target, repo = with_environment(target, settings)
    target = probe_profile(target, settings)
    run, compromised = _guarded_run(target, settings, out, progress)
    warnings = []
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
    )
    report.timings = timings(run.report or {}, run.started_at, (_dt.datetime.now(_dt.UTC) - started).total_seconds())
    report.implementation["repository"] = repo.to_json() if repo is not None else None
    report.implementation["environment"] = target.environment
    report.implementation["fixtures"] = (run.report or {}).get("fixtures")
    return report
