"""Grade one implementation: guard the suite's files, run the judge
(tools.grade.judge), score its report (tools.grade.results) and write the
report files (tools.grade.report)."""

import dataclasses
import datetime as _dt
import os
import platform
import sys
from pathlib import Path
from typing import Any

from lmspec.conformance.adapter import DEFAULT_ADAPTER, looks_like_path, submission_root
from lmspec.tools.grade import envs
from lmspec.tools.grade.files import diff_digests, tree_digest, verify_manifest
from lmspec.tools.grade.judge import JudgeOptions, run_judge
from lmspec.tools.grade.points import PointsTable
from lmspec.tools.grade.report import write_gradescope, write_json, write_junit
from lmspec.tools.grade.repository import inspect, python_problem
from lmspec.tools.grade.results import GradeReport, build_report, timings


def resolve_target(adapter: str) -> str:
    """An adapter file made absolute (the judge runs in its own folder); an
    import name unchanged."""
    return str(Path(adapter).expanduser().resolve()) if looks_like_path(adapter) else adapter


def implementation_name(adapter: str) -> str:
    if looks_like_path(adapter) and Path(adapter).exists():
        return submission_root(Path(adapter)).name
    return adapter


class NotGraded(RuntimeError):
    """The submission cannot be graded as the grader is set up (a Python it
    does not run on, an environment that cannot be built): exit status 2."""


def worker_environment(adapter: str, options: JudgeOptions, env: str, cache: str | None, log: Any = None):
    """The worker's interpreter for this submission and what the grader knows
    of its repository; raises NotGraded with what to do."""
    if not looks_like_path(adapter) or not Path(adapter).exists():
        return options, None, None
    repo = inspect(submission_root(Path(adapter)))
    python = options.python or sys.executable
    version = platform.python_version() if python == sys.executable else None
    try:
        if env == "auto":
            built = envs.prepare(repo, python, envs.cache_root(cache), log)
            problem = python_problem(repo, built.report["python_version"], python)
            if problem:
                raise NotGraded(problem)
            return dataclasses.replace(options, python=built.python), repo, built.report
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
    return options, repo, None


def grade(
    adapter: str,
    *,
    out: Path,
    options: JudgeOptions,
    points: PointsTable | None = None,
    fail_under: float | None = None,
    formats: tuple[str, ...] = ("json", "junit", "gradescope"),
    progress: Any = None,
    env: str = "none",
    env_cache: str | None = None,
) -> GradeReport:
    """Grade one implementation and write the chosen files to ``out``."""
    points = points or PointsTable()
    out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.UTC)
    digest_before = tree_digest()
    manifest_before = verify_manifest() or []
    target = resolve_target(adapter)
    options, repo, env_report = worker_environment(target, options, env, env_cache)
    run = run_judge(target, options, out / "logs", progress)
    manifest_after = verify_manifest() or []
    # Under bubblewrap the submission cannot see the suite's files at all;
    # without it, a change of them during grading is evidence of tampering.
    unsandboxed = (run.report or {}).get("sandbox") != "bwrap"
    changes = diff_digests(digest_before, tree_digest()) if unsandboxed else []
    compromised = [f"the suite's files changed during grading (by the submission?): {c}" for c in changes]
    compromised += [f"snapshots/MANIFEST check failed before grading: {p}" for p in manifest_before]
    compromised += [
        f"snapshots/MANIFEST check failed after grading: {p}" for p in manifest_after if p not in manifest_before
    ]
    warnings = []
    if run.timed_out:
        warnings.append(
            f"the overall time limit (--timeout {options.total_timeout_s:g} s) ran out: results are partial"
        )
    settings = {
        "spec": options.spec,
        "timeout_per_call_s": options.call_timeout_s,
        "timeout_s": options.total_timeout_s,
        "memory_limit_gb": options.memory_gb,
        "jobs": options.jobs,
        "hypothesis_profile": options.profile,
        "device": options.device,
        "sandbox": options.sandbox,
        "env": env,
        "python": options.python or sys.executable,
        "suite": [os.path.relpath(s) for s in options.suite],
        "fail_under": fail_under,
        "partial_credit": points.partial_credit,
    }
    report = build_report(
        run.report or {},
        points=points,
        adapter=adapter if adapter != DEFAULT_ADAPTER else f"{DEFAULT_ADAPTER} (the reference)",
        name=implementation_name(adapter),
        started=started,
        duration_s=run.seconds,
        settings=settings,
        extra_compromised=compromised,
        extra_warnings=warnings,
        run_error=run.problem,
        fail_under=fail_under,
    )
    report.timings = timings(run.report or {}, run.started_at, (_dt.datetime.now(_dt.UTC) - started).total_seconds())
    report.implementation["repository"] = repo.to_json() if repo is not None else None
    report.implementation["environment"] = env_report
    report.implementation["fixtures"] = (run.report or {}).get("fixtures")
    if "json" in formats:
        write_json(report, out / "results.json")
    if "junit" in formats:
        write_junit(report, out / "junit.xml")
    if "gradescope" in formats:
        write_gradescope(report, out / "gradescope_results.json")
    return report
