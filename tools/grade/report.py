"""Render a GradeReport: the terminal table, results.json, JUnit XML and a
Gradescope results.json.

How a STRICT result appears (SPEC.md: reported per item, never scored):
- table: a "strict" column on every item row (ok, the number of STRICT tests
  that did not pass, or "-" when the item has none), and below the table a
  section "STRICT findings (reported, never scored)" with one line per item:
  its first failing STRICT test and the explanation;
- results.json: ``items[].strict`` = {status, explanation, counts, tests}
  and the top-level count ``strict_findings``;
- JUnit: STRICT tests are test cases of their item's suite with classname
  ``<item>.strict``; one that fails is written as ``<skipped
  type="strict-finding">`` with its message, so no CI turns red for a rule
  the course does not grade;
- Gradescope: the item's test entry keeps its score; its output gets a
  "STRICT (reported, not scored)" paragraph (tools/grade/gradescope.py, which
  also sets each item's visibility and the leaderboard, and validates the file).
"""

import re
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from lmspec.conformance.outcomes import Outcome
from lmspec.conformance.plain import plain
from lmspec.tools.grade.gradescope import write_gradescope  # noqa: F401 (re-exported: grading.py, tests)
from lmspec.tools.grade.results import (
    FAILED_OUTCOMES,
    PHASES,
    GradeReport,
    Group,
    ItemResult,
    Status,
    TestResult,
    _num,
    strict_finding_count,
)

_STATUS_COLOR = {
    "pass": "32",
    "fail": "31",
    "error": "31;1",
    "timeout": "33",
    "not implemented": "35",
    "not provided": "2",
    "incomplete": "36",
    "skipped": "2",
}
_VERDICT_COLOR = {"PASS": "pass", "FAIL": "fail", "INCOMPLETE": "incomplete"}
#: Lines of one failing test's message shown below the table (all of it is in results.json).
DETAIL_LINES = 12
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_GROUPS = (
    (Group.CORE, None),
    (Group.EXTENDED, "extended (optional, scored separately)"),
    (Group.SHOULD, "SHOULD rules (reported, not in the score)"),
    (Group.AUDIT, "from-scratch audit (SPEC §0, SHOULD; not in the score)"),
)


def _pts(x: float) -> str:
    value = _num(x)
    return str(value) if isinstance(value, int) else f"{value:.1f}"


def _paint(text: str, status: str, color: bool) -> str:
    code = _STATUS_COLOR.get(status)
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text


def _strict_cell(item: ItemResult) -> str:
    if item.strict is None or item.strict.status in (Status.NOT_IMPLEMENTED, Status.NOT_PROVIDED):
        return "-"
    bad = strict_finding_count(item)
    if not bad:
        return "ok"
    return f"{bad} finding{'s' if bad != 1 else ''}"


def _profile(impl: dict) -> str:
    """The profile graded against, and how it was chosen when not given."""
    name = impl.get("profile") or "cs336"
    how = impl.get("profile_detected_by")
    if not how or how == "given":
        return name
    return f"{name} ({'recognised from its names' if how in ('names', 'worker') else how})"


def render_table(
    report: GradeReport, *, color: bool = False, width: int | None = None, files: tuple[Path, ...] = ()
) -> str:
    """The terminal table: one row per item, then every failing item's
    explanation in full (wrapped to ``width``, the likely cause first), the
    STRICT findings, the counts, the verdict, and where the files are."""
    width = width or shutil.get_terminal_size((120, 40)).columns
    impl = report.implementation
    lines = [f"lmspec grade: {impl['name']}  ({impl.get('origin') or impl['adapter']})"]
    lines.append(f"  profile: {_profile(impl)}   sandbox: {report.sandbox}")
    if report.error:
        lines.extend(_paint(line, "error", color) for line in _wrap(f"ERROR: {report.error}", width, "  ", "    "))
    lines.append(f"  {'item':<26} {'status':<16} {'points':>9} {'strict':>10}  explanation")
    rule = "  " + "-" * (min(width, 150) - 2)
    lines.append(rule)
    for group, title in _GROUPS:
        items = report.group(group)
        if not items:
            continue
        if title:
            lines.append(f"  {title}")
        lines.extend(_row(item, color, width, report.error) for item in items)
    lines.append(rule)
    details = [i for i in report.items if _explained_below(i, report.error)]
    if details:
        lines.append("  Why (each item's first failing test in the suite's order; every message in full: results.json)")
        for item in details:
            lines.extend(_details(item, color, width))
    strict = report.strict_findings()
    if strict:
        lines.append("  STRICT findings (behaviour beyond the course's contract: reported, never scored)")
        for item in strict:
            text = f"{item.id}: {_cause_first(item.strict.explanation)}"  # type: ignore[union-attr]
            lines.extend(_wrap(text, width, "    ", "      "))
    score = report.score_line()
    if report.extended_max_score:
        score += f"   extended {_pts(report.extended_score)}/{_pts(report.extended_max_score)}"
    findings = report.strict_finding_count()
    score += f"   STRICT findings: {findings}" + (f" (in {_plural(len(strict), 'item')})" if findings else "")
    score += f"   audit: {report.audit_status}" + (f" ({len(report.audit)} findings)" if report.audit else "")
    lines.append("  " + score)
    lines.append(f"  {report.tests_line()}   time {report.duration_s:.1f} s")
    for finding in report.audit[:10]:
        during = f" during {finding['adapter_function']}" if finding.get("adapter_function") else ""
        hint = " [reported by the submission's process]" if str(finding.get("source", "")).startswith("worker") else ""
        lines.append(
            f"  audit: {finding.get('function')} ({finding.get('kind')}{during}) at {finding.get('where')}{hint}"
        )
    if len(report.audit) > 10:
        lines.append(f"  audit: ... {len(report.audit) - 10} more in results.json")
    for line in (report.implementation.get("intake") or {}).get("summary") or []:
        lines.extend(_wrap(f"intake: {line}", width, "  ", "    "))
    for warning in report.warnings:
        lines.extend(_paint(line, "timeout", color) for line in _wrap(f"warning: {warning}", width, "  ", "    "))
    if report.compromised:
        lines.append(_paint("  COMPROMISED: the results cannot be trusted:", "error", color))
        lines.extend(f"    - {r}" for r in report.compromised_reasons[:20])
    lines.append(_paint(f"  verdict: {report.verdict_line()}", _VERDICT_COLOR[report.verdict], color))
    lines.append("  the rule of an item: lmspec spec ITEM")
    for path in files:
        lines.append(plain(f"  {_FILE_LABELS.get(path.name, path.name)}: {path}"))
    return "\n".join(lines)


_FILE_LABELS = {
    "results.json": "every message in full",
    "report.html": "the report for a browser",
    "junit.xml": "JUnit",
    "gradescope_results.json": "Gradescope",
}


def _split_cause(explanation: str) -> tuple[str | None, str]:
    """``test: message (likely cause: X)`` or ``test: message; likely cause: X``
    as ``("likely cause: X", "test: message")``; ``(None, explanation)`` without one."""
    at = explanation.find("likely cause")
    if at <= 0:
        return None, explanation
    head, cause = explanation[:at].rstrip(" (;,"), explanation[at:].strip()
    if explanation[:at].rstrip().endswith("(") and cause.endswith(")"):
        cause = cause[:-1]
    return cause.rstrip("."), head


def _cause_first(explanation: str) -> str:
    cause, head = _split_cause(explanation)
    return f"{cause}. {head}" if cause else head


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        " ".join(text.split()),
        width=max(40, width - 1),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _explained_below(item: ItemResult, error: str | None) -> bool:
    if error and item.explanation == f"not run: {error}":
        return False  # the ERROR above says it once
    return item.status in (Status.FAIL, Status.ERROR, Status.TIMEOUT, Status.INCOMPLETE) and bool(item.explanation)


def _details(item: ItemResult, color: bool, width: int) -> list[str]:
    """One failing item in full: its explanation, likely cause first, then the
    rest of its first failing test's message."""
    lines = [_paint(f"  {item.id} ({item.status})", item.status, color)]
    cause, head = _split_cause(item.explanation)
    if cause:
        lines.extend(_wrap(cause, width, "    ", "      "))
    lines.extend(_wrap(head, width, "    " if not cause else "      ", "      "))
    first = next(
        (t for t in item.tests if t.outcome in FAILED_OUTCOMES and item.explanation.startswith(f"{t.short}:")), None
    )
    if first is not None:
        rest = [ln for ln in first.message.splitlines()[1:] if ln.strip() and not ln.startswith("likely cause")]
        for line in rest[:DETAIL_LINES]:
            lines.extend(_wrap(line, width, "      ", "        "))
        if len(rest) > DETAIL_LINES:
            lines.append(f"      ... {len(rest) - DETAIL_LINES} more lines in results.json")
    return lines


def _clip(text: str, room: int) -> str:
    text = text.replace("\n", " ")
    room = max(20, room)
    return text if len(text) <= room else text[: room - 3] + "..."


def _row(item: ItemResult, color: bool, width: int, error: str | None = None) -> str:
    scored = item.group in (Group.CORE, Group.EXTENDED)
    pts = f"{_pts(item.points)}/{_pts(item.max_points)}" if scored else "-"
    status = _paint(f"{item.status:<16}", item.status, color)
    explanation = item.explanation.replace("\n", " ")
    if error and item.explanation == f"not run: {error}":
        explanation = "not run (the ERROR above)"
    elif _explained_below(item, error) and len(explanation) > width - 70:
        explanation = _clip(explanation, width - 70 - 8) + " (below)"
    return f"  {item.id:<26} {status} {pts:>9} {_strict_cell(item):>10}  {explanation}".rstrip()


def render_timings(report: GradeReport) -> str:
    """``--timings``: where the grading's time went."""
    t = report.timings
    if not t:
        return "  timings: not recorded"

    def s(key: str) -> str:
        value = t.get(key)
        return f"{value:6.2f} s" if isinstance(value, int | float) else "     -  "

    starts = t.get("worker_startups_s") or []
    lines = [
        "  timings (wall clock)",
        *(f"    {label:<57}{s(key)}" for label, key in PHASES),
        f"  worker starts: {len(starts)} ({', '.join(f'{x:.2f}' for x in starts)} s, alongside the judge's own)",
        f"  tests' own time, summed over the judge's processes: {t.get('tests_summed_s', 0):.2f} s, "
        f"of which Hypothesis shrinking {t.get('shrinking_s', 0):.2f} s and timeouts {t.get('timeouts_s', 0):.2f} s",
    ]
    if t.get("shrink_budget_reached"):
        lines.append(f"  shrinking stopped at its budget in {len(t['shrink_budget_reached'])} test(s)")
    slowest = list((t.get("per_item_s") or {}).items())[:8]
    lines.append("  slowest items: " + ", ".join(f"{k} {v:.1f} s" for k, v in slowest))
    return "\n".join(lines)


def _clean(text: str) -> str:
    return _XML_BAD.sub("?", text)


_SKIPS = (Outcome.SKIPPED, Outcome.NOT_CHECKED, Outcome.NOT_IMPLEMENTED, Outcome.NOT_PROVIDED)


def write_junit(report: GradeReport, path: Path) -> None:
    root = ET.Element(
        "testsuites",
        name=f"lmspec grade: {report.implementation['name']} (profile {_profile(report.implementation)})",
        time=f"{report.duration_s:.2f}",
    )
    root.set("verdict", report.verdict)
    for item in report.items:
        c = item.counts()
        strict_tests = item.strict.tests if item.strict is not None else []
        strict_skips = sum(t.outcome != Outcome.PASSED for t in strict_tests)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{item.id} {item.title}",
            tests=str(len(item.tests) + len(strict_tests)),
            failures=str(c.get("failed", 0)),
            errors=str(c.get("error", 0) + c.get("timeout", 0)),
            skipped=str(sum(c.get(str(o), 0) for o in _SKIPS) + strict_skips),
            time=f"{sum(t.duration_s for t in item.tests + strict_tests):.2f}",
        )
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("status", str(item.status)),
            ("group", str(item.group)),
            ("points", _pts(item.points)),
            ("max_points", _pts(item.max_points)),
            ("strict_status", str(item.strict.status) if item.strict is not None else "-"),
        ):
            ET.SubElement(props, "property", name=key, value=value)
        for t in item.tests:
            case = _case(suite, item.id, t)
            msg = _clean(t.message)
            if t.outcome == Outcome.FAILED:
                ET.SubElement(case, "failure", message=_clean(t.summary), type="failure").text = msg
            elif t.outcome in (Outcome.ERROR, Outcome.TIMEOUT):
                ET.SubElement(case, "error", message=_clean(t.summary), type=str(t.outcome)).text = msg
            elif t.outcome in _SKIPS:
                ET.SubElement(case, "skipped", message=msg, type=str(t.outcome))
        for t in strict_tests:
            case = _case(suite, f"{item.id}.strict", t)
            if t.outcome != Outcome.PASSED:
                kind = "strict-finding" if t.outcome not in _SKIPS else str(t.outcome)
                text = f"STRICT (reported, not scored): {t.summary}" if kind == "strict-finding" else t.summary
                ET.SubElement(case, "skipped", message=_clean(text), type=kind)
    for key in ("tests", "failures", "errors", "skipped"):  # the sums of the suites (STRICT findings: skipped)
        root.set(key, str(sum(int(suite.get(key, "0")) for suite in root.iter("testsuite"))))
    if report.compromised:
        suite = ET.SubElement(root, "testsuite", name="grader integrity", tests="1", failures="1", errors="0")
        case = ET.SubElement(suite, "testcase", classname="integrity", name="run_not_compromised")
        text = _clean("\n".join(report.compromised_reasons))
        ET.SubElement(case, "failure", message="the run is compromised", type="compromised").text = text
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _case(suite: ET.Element, classname: str, t: TestResult) -> ET.Element:
    path_part, _, name = t.nodeid.partition("::")
    return ET.SubElement(
        suite,
        "testcase",
        classname=classname,
        name=_clean(name or t.nodeid),
        file=path_part,
        time=f"{t.duration_s:.3f}",
    )
