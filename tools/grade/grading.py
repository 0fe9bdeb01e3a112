"""Grade one implementation: guard the suite's files, run the suite in child
processes (tools.grade.runner), score it (tools.grade.results) and write the
report files (tools.grade.report)."""

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from tools.grade.files import diff_digests, tree_digest, verify_manifest
from tools.grade.points import PointsTable
from tools.grade.report import write_gradescope, write_json, write_junit
from tools.grade.results import GradeReport, build_report
from tools.grade.runner import DEFAULT_SUITE, Limits, resolve_adapter, run_suite


def implementation_name(adapter: str) -> str:
    path = Path(adapter)
    if not path.exists():
        return adapter
    from conformance.adapter import _find_root

    root = _find_root(path.resolve())
    return root.name


def grade(
    adapter: str,
    *,
    out: Path,
    limits: Limits,
    points: PointsTable | None = None,
    spec: str | None = None,
    profile: str = "ci",
    device: str = "cpu",
    suite: tuple[str, ...] = DEFAULT_SUITE,
    fail_under: float | None = None,
    formats: tuple[str, ...] = ("json", "junit", "gradescope"),
    progress: Any = None,
) -> GradeReport:
    """Grade one implementation and write the chosen files to ``out``."""
    points = points or PointsTable()
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    if logs.is_dir():
        for old in logs.iterdir():
            if old.is_file():
                old.unlink()
    started = _dt.datetime.now(_dt.UTC)
    digest_before = tree_digest()
    manifest_before = verify_manifest()
    run = run_suite(
        resolve_adapter(adapter),
        workdir=logs,
        suite=suite,
        spec=spec,
        limits=limits,
        profile=profile,
        device=device,
        progress=progress,
    )
    changes = diff_digests(digest_before, tree_digest())
    manifest_after = verify_manifest()
    manifest_problems = [f"before grading: {p}" for p in manifest_before or []]
    manifest_problems += [f"after grading: {p}" for p in manifest_after or [] if p not in (manifest_before or [])]
    settings = {
        "spec": spec,
        "timeout_per_test_s": limits.per_test_s,
        "timeout_s": limits.total_s,
        "memory_limit_gb": limits.memory_gb,
        "jobs": limits.jobs,
        "hypothesis_profile": profile,
        "device": device,
        "suite": [os.path.relpath(s) for s in suite],
        "fail_under": fail_under,
        "partial_credit": points.partial_credit,
    }
    report = build_report(
        run,
        points=points,
        adapter=adapter,
        name=implementation_name(adapter),
        started=started,
        settings=settings,
        file_changes=changes,
        manifest_problems=manifest_problems,
        fail_under=fail_under,
    )
    if "json" in formats:
        write_json(report, out / "results.json")
    if "junit" in formats:
        write_junit(report, out / "junit.xml")
    if "gradescope" in formats:
        write_gradescope(report, out / "gradescope_results.json")
    return report
