"""From the judge's per-test report to a graded report: one status and a
number of points per spec item (its MUST tests), its STRICT result beside it
(reported, never scored), the SHOULD items and the audit, the score, and
whether the run can be trusted (``compromised``).

Item status (first rule that applies), over the item's counted tests:
  error            a test errored (the worker crashed, a fixture failed, import failure)
  timeout          a test ran out of time
  fail             a test failed
  not implemented  every counted test skipped as "not implemented" (core item), or
                   some were and every other one passed: a part is absent, not
                   wrong (the explanation names what passed and what is missing)
  not provided     the same for an extended item
  incomplete       a test could not run: an oracle file it needs was not found
                   ("not checked"); the others passed. Worth 0 points (its share
                   with partial credit), in the maximum, and counted apart in
                   the score line: the grade is incomplete, never a pass
  skipped          every test skipped for another reason (no CUDA, --skips-file)
  pass             every counted test passed
Tests skipped for other reasons than "not implemented/provided" are not
counted. The audit item (0.from_scratch) passes when no finding was made.
The same rules give the STRICT status of an item from its STRICT tests.

The explanation of an item is that of its first test, in the suite's order,
whose outcome sets the status (the judge's report is in the suite's order).

Counts, named the same in the table, results.json, the HTML report, JUnit
and Gradescope: "tests" are every test of the graded items, scored (MUST
and SHOULD) and STRICT, the progress line's total; "failed" is a test that
failed, errored or timed out; a "STRICT finding" is one STRICT test that did
not pass (``strict_findings``), in ``strict_items`` items.
"""

import datetime as _dt
import enum
from dataclasses import dataclass, field
from typing import Any

from lmspec.conformance import profiles
from lmspec.conformance.outcomes import NOT_CHECKED_PREFIX, Outcome
from lmspec.conformance.profiles import Kind as Group
from lmspec.conformance.target import Target
from lmspec.tools.grade.intake import summary as intake_summary
from lmspec.tools.grade.points import PointsTable

SCHEMA = "lmspec-grade/2"
AUDIT_ITEM = "0.from_scratch"
BIG_OUTPUT_BYTES = 1_000_000
_IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError", "PackageNotFoundError")


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    TIMEOUT = "timeout"
    NOT_IMPLEMENTED = "not implemented"
    NOT_PROVIDED = "not provided"
    INCOMPLETE = "incomplete"
    SKIPPED = "skipped"


#: Outcomes of a test that did not pass by its own fault: "failed" in every count.
FAILED_OUTCOMES = (Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT)
#: Outcomes that are not counted in an item's verdict.
UNCOUNTED = (Outcome.SKIPPED, Outcome.NOT_CHECKED)
FIXTURES_HINT = "fixtures missing: run `lmspec fixtures fetch`, or pass --fixtures DIR"


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class

    nodeid: str
    spec: str | None
    strength: str | None
    outcome: Outcome
    message: str = ""
    summary: str = ""
    duration_s: float = 0.0
    props: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "TestResult":
        try:
            outcome = Outcome(record.get("outcome"))
        except ValueError:
            outcome = Outcome.ERROR
        return cls(
            nodeid=str(record.get("nodeid")),
            spec=record.get("spec"),
            strength=record.get("strength"),
            outcome=outcome,
            message=str(record.get("message") or ""),
            summary=str(record.get("summary") or record.get("message") or "").splitlines()[0][:800]
            if record.get("summary") or record.get("message")
            else "",
            duration_s=float(record.get("duration_s") or 0.0),
            props=dict(record.get("props") or {}),
        )

    @property
    def short(self) -> str:
        return self.nodeid.split("::", 1)[-1]

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "strength": self.strength,
            "outcome": str(self.outcome),
            "message": self.message,
            "duration_s": round(self.duration_s, 3),
        }


@dataclass
class Verdict:
    """The status of a set of tests (an item's MUST tests, or its STRICT ones)."""

    status: Status
    explanation: str
    tests: list[TestResult]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tests:
            out[str(t.outcome)] = out.get(str(t.outcome), 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "explanation": self.explanation,
            "counts": self.counts(),
            "tests": [t.to_json() for t in self.tests],
        }


@dataclass
class ItemResult:
    id: str
    title: str
    group: Group
    status: Status
    points: float
    max_points: float
    explanation: str
    tests: list[TestResult]
    strict: Verdict | None = None

    def counts(self) -> dict[str, int]:
        return Verdict(self.status, self.explanation, self.tests).counts()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "group": str(self.group),
            "status": str(self.status),
            "points": _num(self.points),
            "max_points": _num(self.max_points),
            "explanation": self.explanation,
            "counts": self.counts(),
            "tests": [t.to_json() for t in self.tests],
            "strict": self.strict.to_json() if self.strict is not None else None,
        }


class ChapterStatus(enum.StrEnum):
    PASS = "pass"  # every item passed
    FAIL = "fail"  # an item failed, errored or timed out
    IN_PROGRESS = "in progress"  # some items are not written yet, the others passed
    NOT_STARTED = "not started"  # no item written
    INCOMPLETE = "incomplete"  # nothing failed, but a test could not run (oracle files)


@dataclass
class ChapterResult:
    """A chapter of the curriculum (gpt2: the book's): its core items, their
    points, and whether ``--chapters`` named it (then it counts in full)."""

    chapter: str
    status: ChapterStatus
    points: float
    max_points: float
    items: list[str]
    in_full: bool = False

    @property
    def decides(self) -> bool:
        """Whether the chapter's items decide the verdict: started, or named."""
        return self.in_full or self.status != ChapterStatus.NOT_STARTED

    def to_json(self) -> dict[str, Any]:
        return {
            "chapter": self.chapter,
            "status": str(self.status),
            "points": _num(self.points),
            "max_points": _num(self.max_points),
            "items": self.items,
            "counted_in_full": self.in_full,
        }


def chapter_results(profile: profiles.Profile, items: list["ItemResult"], in_full: set[str]) -> list[ChapterResult]:
    """The profile's chapters that have graded items, each with its status."""
    by_id = {i.id: i for i in items if i.group == Group.CORE}
    out = []
    for chapter, ids in profile.chapters:
        mine = [by_id[i] for i in ids if i in by_id]
        if not mine:
            continue
        statuses = {i.status for i in mine}
        written = any(t.outcome == Outcome.PASSED for i in mine for t in i.tests)  # a part of an item
        if statuses <= {Status.NOT_IMPLEMENTED} and not written:
            status = ChapterStatus.NOT_STARTED
        elif statuses & {Status.FAIL, Status.ERROR, Status.TIMEOUT}:
            status = ChapterStatus.FAIL
        elif statuses & {Status.INCOMPLETE}:
            status = ChapterStatus.INCOMPLETE
        elif Status.NOT_IMPLEMENTED in statuses:
            status = ChapterStatus.IN_PROGRESS
        else:
            status = ChapterStatus.PASS
        points, most = sum(i.points for i in mine), sum(i.max_points for i in mine)
        out.append(ChapterResult(chapter, status, points, most, [i.id for i in mine], chapter in in_full))
    return out


def chapters_line(chapters: list[ChapterResult]) -> str:
    """``chapters 2–4: PASS (14/14); chapter 5: not started``: neighbouring
    chapters with the same status are said together."""
    groups: list[list[ChapterResult]] = []
    for c in chapters:
        if groups and groups[-1][-1].status == c.status and groups[-1][-1].in_full == c.in_full:
            groups[-1].append(c)
        else:
            groups.append([c])
    parts = []
    for g in groups:
        label = f"chapter {g[0].chapter}" if len(g) == 1 else f"chapters {g[0].chapter}–{g[-1].chapter}"
        status = g[0].status
        said = "PASS" if status == ChapterStatus.PASS else "FAIL" if status == ChapterStatus.FAIL else str(status)
        points = f" ({_pts(sum(c.points for c in g))}/{_pts(sum(c.max_points for c in g))})"
        if status == ChapterStatus.NOT_STARTED and not g[0].in_full:
            points = ""
        named = " (named by --chapters: counted in full)" if g[0].in_full and status != ChapterStatus.PASS else ""
        parts.append(f"{label}: {said}{points}{named}")
    return "; ".join(parts)


def parse_chapters(text: str | None) -> set[str]:
    """``2-5`` or ``2,4`` (or ``2-3,5``) as chapter labels; ValueError on anything else."""
    if not text:
        return set()
    out: set[str] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (hi.isdigit() and int(hi) < int(lo)):
            raise ValueError(f"--chapters {text!r}: expected chapter numbers such as 2-5 or 2,4")
        out.update(str(n) for n in range(int(lo), int(hi or lo) + 1))
    return out


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
    sandbox: str = "none"
    faults: list[dict[str, Any]] = field(default_factory=list)
    passed: bool = False  # the exit-code verdict
    points_source: str = ""
    timings: dict[str, Any] = field(default_factory=dict)
    chapters: list[ChapterResult] = field(default_factory=list)

    def deciding(self) -> list[ItemResult]:
        """The core items the verdict rests on: all of them; with chapters,
        those of the chapters started or named by ``--chapters``, an item not
        written yet in a started chapter aside (progress is not failure)."""
        core = self.group(Group.CORE)
        if not self.chapters:
            return core
        chaptered = {i for c in self.chapters for i in c.items}
        counted = {i for c in self.chapters if c.decides for i in c.items}
        in_full = {i for c in self.chapters if c.in_full for i in c.items}
        return [
            i
            for i in core
            if i.id not in chaptered or (i.id in counted and (i.status != Status.NOT_IMPLEMENTED or i.id in in_full))
        ]

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0

    def group(self, name: Group) -> list[ItemResult]:
        return [i for i in self.items if i.group == name]

    def strict_findings(self) -> list[ItemResult]:
        """Items with a STRICT finding (an absent function is not a finding)."""
        return [i for i in self.items if strict_finding_count(i)]

    def strict_finding_count(self) -> int:
        """STRICT findings: STRICT tests that did not pass (failed, errored, timed out)."""
        return sum(strict_finding_count(i) for i in self.items)

    def all_tests(self) -> list[TestResult]:
        """Every test of the graded items: scored and STRICT."""
        return [t for i in self.items for t in [*i.tests, *(i.strict.tests if i.strict is not None else [])]]

    def test_counts(self) -> dict[str, int]:
        """Tests by outcome, over every test (scored and STRICT)."""
        out: dict[str, int] = {}
        for t in self.all_tests():
            out[str(t.outcome)] = out.get(str(t.outcome), 0) + 1
        return out

    @property
    def not_checked_points(self) -> float:
        """Points of core items whose tests could not all run (oracle files missing)."""
        return sum(i.max_points - i.points for i in self.group(Group.CORE) if i.status == Status.INCOMPLETE)

    @property
    def incomplete(self) -> bool:
        return any(i.status == Status.INCOMPLETE for i in self.group(Group.CORE))

    @property
    def verdict(self) -> str:
        """PASS, FAIL, or INCOMPLETE (nothing failed, but some scored tests could not run)."""
        if self.passed:
            return "PASS"
        done = (Status.PASS, Status.SKIPPED, Status.INCOMPLETE)
        deciding = self.deciding()
        failing = [i for i in deciding if i.status not in done]
        if self.incomplete and deciding and not failing and not self.error and not self.compromised:
            return "INCOMPLETE"
        return "FAIL"

    def score_line(self) -> str:
        """``score 33/62 (53.2%) + 29 not checked (fixtures missing: run `lmspec fixtures fetch`, ...)``"""
        line = f"score {_pts(self.score)}/{_pts(self.max_score)} ({self.percent:.1f}%)"
        if self.incomplete:
            line += f" + {_pts(self.not_checked_points)} not checked ({FIXTURES_HINT})"
        return line

    def chapters_line(self) -> str:
        """The verdict per chapter (profiles with chapters), else ""."""
        return chapters_line(self.chapters) if self.chapters else ""

    def verdict_line(self) -> str:
        chapters = f" ({self.chapters_line()})" if self.chapters else ""
        return self._verdict_line() + chapters

    def _verdict_line(self) -> str:
        if self.verdict == "INCOMPLETE":
            return (
                f"INCOMPLETE: {_pts(self.not_checked_points)} of {_pts(self.max_score)} points could not be "
                f"checked ({FIXTURES_HINT})"
            )
        if self.verdict == "FAIL" and self.incomplete:
            return f"FAIL (and incomplete: {_pts(self.not_checked_points)} points not checked, {FIXTURES_HINT})"
        return self.verdict

    def tests_line(self) -> str:
        """``tests: 274 (207 scored, 67 STRICT): 253 passed, 21 failed (2 errors), ...``"""
        all_tests = self.all_tests()
        strict = sum(t.strength == "strict" for t in all_tests)
        counts = self.test_counts()
        failed = sum(counts.get(str(o), 0) for o in FAILED_OUTCOMES)
        parts = [f"{counts[str(Outcome.PASSED)]} passed"] if counts.get(str(Outcome.PASSED)) else []
        if failed:
            detail = [
                f"{counts[str(o)]} {name}"
                for o, name in ((Outcome.ERROR, "errors"), (Outcome.TIMEOUT, "timeouts"))
                if counts.get(str(o))
            ]
            strict_failed = sum(t.strength == "strict" and t.outcome in FAILED_OUTCOMES for t in all_tests)
            if strict_failed:
                detail.append(f"{strict_failed} of them STRICT")
            parts.append(f"{failed} failed" + (f" ({', '.join(detail)})" if detail else ""))
        for o in (Outcome.NOT_CHECKED, Outcome.NOT_IMPLEMENTED, Outcome.NOT_PROVIDED, Outcome.SKIPPED):
            if counts.get(str(o)):
                parts.append(f"{counts[str(o)]} {str(o).replace('_', ' ')}")
        head = f"tests: {len(all_tests)} ({len(all_tests) - strict} scored, {strict} STRICT)"
        return head + (": " + ", ".join(parts) if parts else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "profile": self.implementation.get("profile"),
            "implementation": self.implementation,
            "started": self.started,
            "duration_s": round(self.duration_s, 2),
            "environment": self.environment,
            "settings": self.settings,
            "sandbox": self.sandbox,
            "score": _num(self.score),
            "max_score": _num(self.max_score),
            "percent": round(self.percent, 2),
            "extended_score": _num(self.extended_score),
            "extended_max_score": _num(self.extended_max_score),
            "passed": self.passed,
            "verdict": self.verdict,
            "incomplete": self.incomplete,
            "not_checked_points": _num(self.not_checked_points),
            "score_line": self.score_line(),
            "chapters": [c.to_json() for c in self.chapters],
            "chapters_line": self.chapters_line(),
            "tests_line": self.tests_line(),
            "test_counts": {"total": len(self.all_tests()), **self.test_counts()},
            "compromised": self.compromised,
            "compromised_reasons": self.compromised_reasons,
            "error": self.error,
            "strict_findings": self.strict_finding_count(),
            "strict_items": len(self.strict_findings()),
            "audit_status": self.audit_status,
            "audit": self.audit,
            "warnings": self.warnings,
            "faults": self.faults,
            "points_source": self.points_source,
            "timings": self.timings,
            "items": [i.to_json() for i in self.items],
        }


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


def _pts(x: float) -> str:
    value = _num(x)
    return str(value) if isinstance(value, int) else f"{value:.1f}"


def strict_finding_count(item: "ItemResult") -> int:
    """The item's STRICT findings: its STRICT tests that failed, errored or timed out."""
    if item.strict is None:
        return 0
    return sum(t.outcome in FAILED_OUTCOMES for t in item.strict.tests)


def verdict(tests: list[TestResult], *, extended: bool, audit: bool) -> Verdict:
    """The status and one-line explanation of a set of tests (rules above)."""
    counted = [t for t in tests if t.outcome not in UNCOUNTED]
    unchecked = [t for t in tests if t.outcome == Outcome.NOT_CHECKED]
    if not counted:
        if unchecked:
            return Verdict(Status.INCOMPLETE, _not_checked(unchecked, tests), tests)
        first = next(iter(tests), None)
        return Verdict(Status.SKIPPED, f"{first.short}: {first.summary}" if first else "no tests", tests)

    def first(*outcomes: Outcome) -> TestResult | None:
        return next((t for t in counted if t.outcome in outcomes), None)

    absent = (Outcome.NOT_IMPLEMENTED, Outcome.NOT_PROVIDED)
    for outcome, status in (
        (Outcome.ERROR, Status.ERROR),
        (Outcome.TIMEOUT, Status.TIMEOUT),
        (Outcome.FAILED, Status.FAIL),
    ):
        bad = first(outcome)
        if bad is not None:
            return Verdict(status, f"{bad.short}: {bad.summary}", tests)
    if all(t.outcome in absent for t in counted):
        return Verdict(Status.NOT_PROVIDED if extended else Status.NOT_IMPLEMENTED, counted[0].summary, tests)
    missing = first(*absent)
    if missing is not None and not audit:
        n = sum(t.outcome in absent for t in counted)
        passed = len(counted) - n
        return Verdict(
            Status.NOT_PROVIDED if extended else Status.NOT_IMPLEMENTED,
            f"partly written: {passed} of {len(counted)} tests ran and passed; the others could not run: "
            f"{missing.summary}",
            tests,
        )
    if unchecked:
        return Verdict(Status.INCOMPLETE, _not_checked(unchecked, tests), tests)
    return Verdict(Status.PASS, "", tests)


def _not_checked(unchecked: list[TestResult], tests: list[TestResult]) -> str:
    """Why an item is incomplete: how many of its tests could not run, and the first one's reason."""
    reason = unchecked[0].summary.removeprefix(NOT_CHECKED_PREFIX).strip()
    return f"{len(unchecked)} of {len(tests)} tests not checked ({FIXTURES_HINT}): {reason}"


def _lazy_import_error(items: list[ItemResult]) -> str | None:
    """One import problem behind every failing core item (a package that
    fails inside each adapter call, not at the adapter's import)."""
    failing = [i for i in items if i.group == Group.CORE and i.status in (Status.FAIL, Status.ERROR)]
    messages = set()
    for item in failing:
        bad = next((t for t in item.tests if t.outcome in (Outcome.FAILED, Outcome.ERROR)), None)
        if bad is None or not bad.message.startswith(_IMPORT_ERRORS):
            return None
        messages.add(bad.message.splitlines()[0])
    if len(failing) >= 3 and len(messages) == 1:
        return f"the implementation fails to import inside every adapter call: {messages.pop()}"
    return None


def _item_result(spec_item: profiles.SpecItem, tests: list[TestResult], points: PointsTable) -> ItemResult:
    """One item: its scored verdict and points from its MUST tests, its STRICT verdict beside."""
    group = spec_item.kind
    scored = [t for t in tests if t.strength != "strict"]
    strict = [t for t in tests if t.strength == "strict"]
    audit = group == Group.AUDIT
    main = verdict(scored, extended=spec_item.extended, audit=audit) if scored else Verdict(Status.SKIPPED, "", [])
    max_points = points[spec_item.id] if group in (Group.CORE, Group.EXTENDED) else 0.0
    if main.status == Status.PASS:
        earned = max_points
    elif points.partial_credit and main.status != Status.SKIPPED:
        counted = [t for t in scored if t.outcome != Outcome.SKIPPED]  # not-checked tests count, unearned
        earned = max_points * sum(t.outcome == Outcome.PASSED for t in counted) / len(counted)
    else:
        earned = 0.0
    if main.status == Status.SKIPPED:
        max_points = 0.0  # nothing could be checked here: not in the maximum
    strict_verdict = verdict(strict, extended=spec_item.extended, audit=audit) if strict else None
    return ItemResult(
        spec_item.id, spec_item.title, group, main.status, earned, max_points, main.explanation, scored, strict_verdict
    )


def score_items(profile: profiles.Profile, tests: list[TestResult], points: PointsTable) -> list[ItemResult]:
    """The profile's items that have tests, in the record's order."""
    by_item: dict[str, list[TestResult]] = {}
    for t in tests:
        if t.spec is not None and profile.has_item(t.spec):
            by_item.setdefault(t.spec, []).append(t)
    return [_item_result(i, by_item[i.id], points) for i in profile.items if by_item.get(i.id)]


def _audit_status(items: list[ItemResult], findings: list[dict[str, Any]]) -> str:
    audit_item = next((i for i in items if i.group == Group.AUDIT), None)
    if audit_item is None:
        return "not run"
    if findings:
        return "findings"
    return {Status.PASS: "clean"}.get(audit_item.status, str(audit_item.status))


def _warnings(judge: dict[str, Any], tests: list[TestResult], items: list[ItemResult], extra: list[str]) -> list[str]:
    warnings = [str(w) for w in judge.get("warnings") or []] + list(extra)
    for t in tests:
        printed = int(t.props.get("output_bytes") or 0)
        if printed > BIG_OUTPUT_BYTES:
            warnings.append(f"{t.short} printed {printed / 1e6:.1f} MB of output")
    restarts = len([f for f in judge.get("faults") or [] if isinstance(f, dict)])
    if restarts:
        warnings.append(f"the worker was restarted {restarts} time(s) after a crash or timeout")
    for item in items:
        if item.status == Status.SKIPPED and item.group != Group.AUDIT:
            warnings.append(f"{item.id}: every test was skipped ({item.explanation}); not in the maximum score")
    return warnings


def _implementation(judge: dict[str, Any], target: Target) -> dict[str, Any]:
    worker = judge.get("worker") or {}
    taken = judge.get("intake")
    if isinstance(taken, dict):
        taken = {**taken, "summary": intake_summary(taken)}
    return {
        "name": target.name,
        "adapter": target.given if not target.is_reference else f"{target.adapter} (the reference)",
        "profile": target.profile,
        "profile_detected_by": target.detected_by,
        "origin": judge.get("origin"),
        "root": judge.get("root"),
        "import_error": judge.get("import_error"),
        "intake": taken if isinstance(taken, dict) else None,
        "metadata": worker.get("metadata"),
        "missing_core": judge.get("missing_core"),
        "missing_extended": judge.get("missing_extended"),
    }


def _environment(judge: dict[str, Any]) -> dict[str, Any]:
    """The judge's Python and the worker's facts (its metadata aside)."""
    worker = judge.get("worker") or {}
    return {"judge_python": judge.get("python"), **{f"worker_{k}": v for k, v in worker.items() if k != "metadata"}}


def build_report(
    judge: dict[str, Any],
    *,
    points: PointsTable,
    target: Target,
    started: _dt.datetime,
    duration_s: float,
    settings: dict[str, Any],
    extra_compromised: list[str] = (),  # type: ignore[assignment]
    extra_warnings: list[str] = (),  # type: ignore[assignment]
    run_error: str | None = None,
    fail_under: float | None = None,
    chapters: set[str] | None = None,
) -> GradeReport:
    """The graded report of one judge report (the module docstring's rules);
    ``chapters``: those named by ``--chapters`` (counted in full)."""
    tests = [TestResult.from_record(r) for r in judge.get("tests") or [] if isinstance(r, dict)]
    items = score_items(profiles.get(target.profile), tests, points)
    audit_findings = _audit(items)
    reasons = list(dict.fromkeys([str(r) for r in judge.get("compromised") or []] + list(extra_compromised)))
    compromised = bool(reasons)
    warnings = _warnings(judge, tests, items, list(extra_warnings))
    not_loaded = run_error or load_error(judge)
    if run_error:  # the run itself is in doubt: no item's result stands, and none is left out
        why = f"not graded: {run_error}"
        for item in items:
            item.status, item.points, item.explanation = Status.ERROR, 0.0, why
        selected = error_items(profiles.get(target.profile), settings.get("spec"), points, why)
        items = list(({i.id: i for i in selected} | {i.id: i for i in items}).values())  # those that ran: as they ran
    error = not_loaded or _lazy_import_error(items)
    core = [i for i in items if i.group == Group.CORE]
    ext = [i for i in items if i.group == Group.EXTENDED]
    score = sum(i.points for i in core)
    if compromised:
        warnings.append("the run is compromised: the score is set to 0 (see compromised_reasons)")
        score = 0.0
    if not_loaded:
        score = 0.0
    report = GradeReport(
        implementation=_implementation(judge, target),
        started=started.astimezone(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        duration_s=duration_s,
        environment=_environment(judge),
        settings=settings,
        items=items,
        score=score,
        max_score=sum(i.max_points for i in core),
        extended_score=sum(i.points for i in ext),
        extended_max_score=sum(i.max_points for i in ext),
        audit=audit_findings,
        audit_status=_audit_status(items, audit_findings),
        compromised=compromised,
        compromised_reasons=reasons,
        error=error,
        warnings=warnings,
        sandbox=str(judge.get("sandbox") or "none"),
        faults=[f for f in judge.get("faults") or [] if isinstance(f, dict)],
        points_source=points.source,
    )
    profile = profiles.get(target.profile)
    report.chapters = chapter_results(profile, items, set(chapters or ()))
    unknown = sorted(set(chapters or ()) - {c for c, _ in profile.chapters}, key=lambda c: (len(c), c))
    if unknown:
        known = ", ".join(c for c, _ in profile.chapters) or "none"
        report.warnings.append(f"--chapters: no chapter {', '.join(unknown)} in profile {profile.name} (its: {known})")
    deciding = report.deciding()
    started = any(c.status != ChapterStatus.NOT_STARTED for c in report.chapters)  # a part written is a start
    all_core_pass = (bool(deciding) or started) and all(i.status in (Status.PASS, Status.SKIPPED) for i in deciding)
    by_threshold = fail_under is not None and report.percent >= fail_under
    report.passed = not compromised and not report.error and (all_core_pass or by_threshold)
    return report


def load_error(judge: dict[str, Any]) -> str | None:
    imp = judge.get("import_error")
    if isinstance(imp, dict):
        where = f"{imp.get('file')}:{imp.get('line')}: " if imp.get("file") else ""
        message = (str(imp.get("message") or "").splitlines() or [""])[0][:300]
        return f"the adapter failed to import: {where}{imp.get('type')}: {message}"
    if judge.get("start_error"):
        return str(judge["start_error"]).splitlines()[0]
    return None


def _audit(items: list[ItemResult]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    seen = set()
    for item in items:
        if item.group != Group.AUDIT:
            continue
        for t in item.tests:
            for finding in t.props.get("audit_findings") or []:
                if isinstance(finding, dict):
                    key = tuple(sorted((k, str(v)) for k, v in finding.items()))
                    if key not in seen:
                        seen.add(key)
                        found.append(finding)
    return found


#: The wall-clock phases of ``timings``, as the table and the HTML report name them. The judge
#: starts its worker when it starts (conformance/session.py, start_early): the worker loads while
#: the judge imports torch and collects, and the first result waits only for what is left of it.
PHASES = (
    ("judge start-up (Python, pytest, the suite's plugin)", "judge_startup_s"),
    ("collection (torch, the test modules)", "collection_s"),
    ("until the first result (the rest of the worker's start)", "until_first_result_s"),
    ("tests", "tests_wall_s"),
    ("after the judge (scoring, reports)", "after_judge_s"),
    ("total", "total_s"),
)


def timings(judge: dict[str, Any], started_at: float, total_s: float) -> dict[str, Any]:
    """Where a grading's time went, by phase (``--timings``; results.json).

    Wall-clock phases of the judge process (PHASES: start-up, Python, pytest,
    Hypothesis and the suite's plugin; collection, torch and the test modules;
    the first result, which waits for what is left of the worker's start; the
    tests), every worker start (from its process's start), and the tests' own
    time per item, of which Hypothesis shrinking and timeouts (summed over the
    judge's parallel processes, so it can exceed the wall time)."""
    stamps = judge.get("stamps") or {}
    out: dict[str, Any] = {"total_s": round(total_s, 2)}

    def span(a: float | None, b: float | None) -> float | None:
        return round(b - a, 2) if a and b else None

    out["judge_startup_s"] = span(started_at, stamps.get("configured"))
    out["collection_s"] = span(stamps.get("configured"), stamps.get("collected"))
    out["until_first_result_s"] = span(stamps.get("collected"), stamps.get("first_result"))
    out["tests_wall_s"] = span(stamps.get("first_result"), stamps.get("finished"))
    out["after_judge_s"] = round(started_at + total_s - stamps["finished"], 2) if stamps.get("finished") else None
    startups = [float(x) for x in judge.get("worker_startups") or []]
    out["worker_startups_s"] = startups
    per_item: dict[str, float] = {}
    shrink = 0.0
    shrink_stopped: list[str] = []
    timeouts = 0.0
    for record in judge.get("tests") or []:
        seconds = float(record.get("duration_s") or 0.0)
        item = str(record.get("spec"))
        per_item[item] = per_item.get(item, 0.0) + seconds
        phases = (record.get("props") or {}).get("hypothesis") or {}
        shrink += float(phases.get("shrink", 0.0))
        if "slow" in str(phases.get("stopped", "")):
            shrink_stopped.append(str(record.get("nodeid")))
        if record.get("outcome") == Outcome.TIMEOUT:
            timeouts += seconds
    out["tests_summed_s"] = round(sum(per_item.values()), 2)
    out["per_item_s"] = {k: round(v, 2) for k, v in sorted(per_item.items(), key=lambda kv: -kv[1])}
    out["shrinking_s"] = round(shrink, 2)
    out["shrink_budget_reached"] = shrink_stopped
    out["timeouts_s"] = round(timeouts, 2)
    return out


def error_items(profile: profiles.Profile, spec: str | None, points: PointsTable, why: str) -> list[ItemResult]:
    """Every item of ``profile`` that ``spec`` selects (all without one), as an error worth 0 of its
    points, ``why`` its explanation."""
    items = []
    for spec_item in profile.selected(spec):
        group = spec_item.kind
        max_points = points[spec_item.id] if group in (Group.CORE, Group.EXTENDED) else 0.0
        items.append(ItemResult(spec_item.id, spec_item.title, group, Status.ERROR, 0.0, max_points, why, []))
    return items


def error_report(
    error: str,
    *,
    points: PointsTable,
    target: Target,
    started: _dt.datetime,
    duration_s: float,
    settings: dict[str, Any],
    spec: str | None,
    sandbox: str,
    warnings: list[str] = (),  # type: ignore[assignment]
) -> GradeReport:
    """The report of a submission that could not be run at all, by its own
    fault (an adapters file that is a link out of it, an environment that
    cannot be built): every selected item of its profile is an error worth
    0 of its points, and ``error`` says why."""
    items = error_items(profiles.get(target.profile), spec, points, f"not run: {error}")
    core = [i for i in items if i.group == Group.CORE]
    ext = [i for i in items if i.group == Group.EXTENDED]
    return GradeReport(
        implementation=_implementation({}, target),
        started=started.astimezone(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        duration_s=duration_s,
        environment={},
        settings=settings,
        items=items,
        score=0.0,
        max_score=sum(i.max_points for i in core),
        extended_score=0.0,
        extended_max_score=sum(i.max_points for i in ext),
        audit=[],
        audit_status="not run",
        compromised=False,
        compromised_reasons=[],
        error=error,
        warnings=list(warnings),
        sandbox=sandbox,
        points_source=points.source,
    )
