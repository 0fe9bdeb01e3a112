"""From per-test outcomes to a graded report: one status and a number of
points per spec item, the score, the audit findings, and whether the run can
be trusted (``compromised``).

Item status (first rule that applies):
  error            a test errored (crashed process, fixture error, import failure)
  timeout          a test ran out of time
  fail             a test failed, or the item is only partly implemented
  not implemented  every counted test skipped as "not implemented" (core item)
  not provided     every counted test skipped as "not provided" (extended item)
  skipped          every test skipped for another reason (fixtures missing, no CUDA)
  pass             every counted test passed
Tests skipped for other reasons than "not implemented/provided" are not
counted. The audit item (0.from_scratch) passes when no finding was made; its
skipped functions (not implemented) do not make it fail.
"""

import datetime as _dt
from dataclasses import asdict, dataclass, field
from typing import Any

from conformance.spec_items import BY_ID, ITEMS
from tools.grade.points import PointsTable
from tools.grade.runner import (
    ERROR,
    FAILED,
    NOT_IMPLEMENTED,
    NOT_PROVIDED,
    PASSED,
    SKIPPED,
    TIMEOUT,
    SuiteRun,
    TestOutcome,
)

SCHEMA = "lmspec-grade/1"
AUDIT_ITEM = "0.from_scratch"
PASS, FAIL, STATUS_ERROR, STATUS_TIMEOUT = "pass", "fail", "error", "timeout"
STATUS_NOT_IMPLEMENTED, STATUS_NOT_PROVIDED, STATUS_SKIPPED = (
    "not implemented",
    "not provided",
    "skipped",
)
BIG_OUTPUT_BYTES = 1_000_000


@dataclass
class ItemResult:
    id: str
    title: str
    group: str  # "core" | "extended" | "should" | "audit"
    status: str
    points: float
    max_points: float
    explanation: str
    tests: list[TestOutcome]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tests:
            out[t.outcome] = out.get(t.outcome, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "group": self.group,
            "status": self.status,
            "points": _num(self.points),
            "max_points": _num(self.max_points),
            "explanation": self.explanation,
            "counts": self.counts(),
            "tests": [t.to_json() for t in self.tests],
        }


@dataclass
class GradeReport:
    implementation: dict[str, Any]
    started: str
    duration_s: float
    environment: dict[str, Any]
    settings: dict[str, Any]
    items: list[ItemResult]
    score: float
    max_score: float
    extended_score: float
    extended_max_score: float
    audit: list[dict[str, Any]]
    audit_status: str
    compromised: bool
    compromised_reasons: list[str]
    error: str | None
    warnings: list[str] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    passed: bool = False  # the exit-code verdict
    points_source: str = ""

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0

    def group(self, name: str) -> list[ItemResult]:
        return [i for i in self.items if i.group == name]

    def test_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for item in self.items:
            for k, v in item.counts().items():
                out[k] = out.get(k, 0) + v
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "implementation": self.implementation,
            "started": self.started,
            "duration_s": round(self.duration_s, 2),
            "environment": self.environment,
            "settings": self.settings,
            "score": _num(self.score),
            "max_score": _num(self.max_score),
            "percent": round(self.percent, 2),
            "extended_score": _num(self.extended_score),
            "extended_max_score": _num(self.extended_max_score),
            "passed": self.passed,
            "compromised": self.compromised,
            "compromised_reasons": self.compromised_reasons,
            "error": self.error,
            "audit_status": self.audit_status,
            "audit": self.audit,
            "warnings": self.warnings,
            "points_source": self.points_source,
            "items": [i.to_json() for i in self.items],
            "attempts": self.attempts,
        }


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


def _short(nodeid: str) -> str:
    return nodeid.split("::", 1)[-1]


def item_status(tests: list[TestOutcome], *, extended: bool, audit: bool) -> tuple[str, str]:
    """(status, one-line explanation) of one spec item from its tests."""
    counted = [t for t in tests if t.outcome != SKIPPED]
    if not counted:
        first = next((t for t in tests), None)
        return STATUS_SKIPPED, (f"{_short(first.nodeid)}: {first.message}" if first else "no tests")

    def first(*outcomes: str) -> TestOutcome | None:
        return next((t for t in counted if t.outcome in outcomes), None)

    absent = (NOT_IMPLEMENTED, NOT_PROVIDED)
    for outcome, status in ((ERROR, STATUS_ERROR), (TIMEOUT, STATUS_TIMEOUT), (FAILED, FAIL)):
        bad = first(outcome)
        if bad is not None:
            return status, f"{_short(bad.nodeid)}: {bad.message}"
    if all(t.outcome in absent for t in counted):
        return (STATUS_NOT_PROVIDED if extended else STATUS_NOT_IMPLEMENTED), counted[0].message
    missing = first(*absent)
    if missing is not None and not audit:
        n = sum(t.outcome in absent for t in counted)
        return FAIL, f"partly implemented ({n} of {len(counted)} tests): {missing.message}"
    return PASS, ""


def _group(item_id: str) -> str:
    if item_id == AUDIT_ITEM:
        return "audit"
    if BY_ID[item_id].should:
        return "should"
    return "extended" if BY_ID[item_id].extended else "core"


def build_report(
    run: SuiteRun,
    *,
    points: PointsTable,
    adapter: str,
    name: str,
    started: _dt.datetime,
    settings: dict[str, Any],
    file_changes: list[str] = (),  # type: ignore[assignment]
    manifest_problems: list[str] = (),  # type: ignore[assignment]
    fail_under: float | None = None,
) -> GradeReport:
    by_item: dict[str, list[TestOutcome]] = {}
    for t in run.tests.values():
        if t.spec in BY_ID:
            by_item.setdefault(t.spec, []).append(t)
    items: list[ItemResult] = []
    for spec_item in ITEMS:
        tests = by_item.get(spec_item.id)
        if not tests:
            continue
        group = _group(spec_item.id)
        status, why = item_status(tests, extended=spec_item.extended, audit=group == "audit")
        max_points = points[spec_item.id]
        if status == PASS:
            earned = max_points
        elif points.partial_credit and status not in (STATUS_SKIPPED,):
            counted = [t for t in tests if t.outcome != SKIPPED]
            earned = max_points * sum(t.outcome == PASSED for t in counted) / len(counted)
        else:
            earned = 0.0
        if status == STATUS_SKIPPED:
            max_points = 0.0  # nothing could be checked here: not in the maximum
        items.append(ItemResult(spec_item.id, spec_item.title, group, status, earned, max_points, why, tests))

    # --- audit findings -------------------------------------------------------------
    audit: list[dict[str, Any]] = []
    seen = set()
    for item in items:
        if item.group != "audit":
            continue
        for t in item.tests:
            for finding in t.props.get("audit_findings") or []:
                if isinstance(finding, dict):
                    key = tuple(sorted((k, str(v)) for k, v in finding.items()))
                    if key not in seen:
                        seen.add(key)
                        audit.append(finding)
    audit_item = next((i for i in items if i.group == "audit"), None)
    if audit_item is None:
        audit_status = "not run"
    elif audit:
        audit_status = "findings"
    else:
        audit_status = {PASS: "clean"}.get(audit_item.status, audit_item.status)

    # --- trust ------------------------------------------------------------------------
    reasons: list[str] = []
    reasons += [f"tampering detected at adapter import: {r}" for r in run.import_tampering]
    by_message: dict[str, list[str]] = {}
    for t in run.tests.values():
        if "tampering" in t.props or t.message.startswith("tampering detected"):
            by_message.setdefault(str(t.props.get("tampering") or t.message), []).append(t.nodeid)
    for message, nodeids in by_message.items():
        if run.import_tampering and "at adapter import" in message:
            continue  # already listed once, above
        more = f" and {len(nodeids) - 1} more" if len(nodeids) > 1 else ""
        reasons.append(f"{message} (in {_short(nodeids[0])}{more})")
    reasons += [f"the suite's files changed during grading (by the submission?): {c}" for c in file_changes]
    reasons += [f"snapshots/MANIFEST check failed: {p}" for p in manifest_problems]
    reasons += [f"result stream: {a}" for a in run.anomalies]
    reasons = list(dict.fromkeys(reasons))
    compromised = bool(reasons)

    # --- warnings -------------------------------------------------------------------------
    warnings: list[str] = []
    for t in run.tests.values():
        if t.output_bytes > BIG_OUTPUT_BYTES:
            warnings.append(f"{_short(t.nodeid)} printed {t.output_bytes / 1e6:.1f} MB of output")
    restarts = len(run.attempts) - 1
    if restarts > 0:
        warnings.append(f"the test process was restarted {restarts} time(s) after a crash, kill or hang")
    for item in items:
        if item.status == STATUS_SKIPPED:
            warnings.append(f"{item.id}: every test was skipped ({item.explanation}); not in the maximum score")

    core = [i for i in items if i.group == "core"]
    ext = [i for i in items if i.group == "extended"]
    score = sum(i.points for i in core)
    max_score = sum(i.max_points for i in core)
    if compromised:
        warnings.append("the run is compromised: the score is set to 0 (see compromised_reasons)")
        score = 0.0
    if run.error:
        score = 0.0
    report = GradeReport(
        implementation={
            "name": name,
            "adapter": adapter,
            "origin": run.adapter.get("origin"),
            "import_error": run.adapter.get("error"),
            "missing_core": run.adapter.get("missing_core"),
            "missing_extended": run.adapter.get("missing_extended"),
        },
        started=started.astimezone(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        duration_s=run.duration_s,
        environment=run.environment,
        settings=settings,
        items=items,
        score=score,
        max_score=max_score,
        extended_score=sum(i.points for i in ext),
        extended_max_score=sum(i.max_points for i in ext),
        audit=audit,
        audit_status=audit_status,
        compromised=compromised,
        compromised_reasons=reasons,
        error=run.error or run.adapter.get("error"),
        warnings=warnings,
        attempts=[asdict(a) for a in run.attempts],
        points_source=points.source,
    )
    all_core_pass = bool(core) and all(i.status in (PASS, STATUS_SKIPPED) for i in core)
    by_threshold = fail_under is not None and report.percent >= fail_under
    report.passed = not compromised and not report.error and (all_core_pass or by_threshold)
    return report
