"""Grade one implementation: guard the suite's files, run the judge
(tools.grade.judge), score its report (tools.grade.results) and write the
report files (tools.grade.report)."""

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from conformance.adapter import DEFAULT_ADAPTER, looks_like_path, submission_root
from tools.grade.files import diff_digests, tree_digest, verify_manifest
from tools.grade.judge import JudgeOptions, run_judge
from tools.grade.points import PointsTable
from tools.grade.report import write_gradescope, write_json, write_junit
from tools.grade.results import GradeReport, build_report


def resolve_target(adapter: str) -> str:
    """An adapter file made absolute (the judge runs in its own folder); an
    import name unchanged."""
    return str(Path(adapter).expanduser().resolve()) if looks_like_path(adapter) else adapter


def implementation_name(adapter: str) -> str:
    if looks_like_path(adapter) and Path(adapter).exists():
        return submission_root(Path(adapter)).name
    return adapter


def grade(
    adapter: str,
    *,
    out: Path,
    options: JudgeOptions,
    points: PointsTable | None = None,
    fail_under: float | None = None,
    formats: tuple[str, ...] = ("json", "junit", "gradescope"),
    progress: Any = None,
) -> GradeReport:
    """Grade one implementation and write the chosen files to ``out``."""
    points = points or PointsTable()
    out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.UTC)
    digest_before = tree_digest()
    manifest_before = verify_manifest() or []
    target = resolve_target(adapter)
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
    if "json" in formats:
        write_json(report, out / "results.json")
    if "junit" in formats:
        write_junit(report, out / "junit.xml")
    if "gradescope" in formats:
        write_gradescope(report, out / "gradescope_results.json")
    return report
