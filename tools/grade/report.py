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
import xml.etree.ElementTree as ET
from pathlib import Path

from lmspec.conformance.outcomes import Outcome
from lmspec.tools.grade.gradescope import write_gradescope  # noqa: F401 (re-exported: grading.py, tests)
from lmspec.tools.grade.results import GradeReport, Group, ItemResult, Status, TestResult, _num

_STATUS_COLOR = {
    "pass": "32",
    "fail": "31",
    "error": "31;1",
    "timeout": "33",
    "not implemented": "35",
    "not provided": "2",
    "skipped": "2",
}
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
    if item.strict.status in (Status.PASS, Status.SKIPPED):
        return "ok"
    bad = sum(t.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT) for t in item.strict.tests)
    return f"{bad} finding{'s' if bad != 1 else ''}"


def render_table(report: GradeReport, *, color: bool = False, width: int | None = None) -> str:
    width = width or shutil.get_terminal_size((120, 40)).columns
    impl = report.implementation
    lines = [f"lmspec grade: {impl['name']}  ({impl.get('origin') or impl['adapter']})"]
    lines.append(f"  sandbox: {report.sandbox}")
    if report.error:
        lines.append(_paint(f"  ERROR: {report.error}", "error", color))
    lines.append(f"  {'item':<26} {'status':<16} {'points':>9} {'strict':>10}  explanation")
    rule = "  " + "-" * (min(width, 150) - 2)
    lines.append(rule)
    for group, title in _GROUPS:
        items = report.group(group)
        if not items:
            continue
        if title:
            lines.append(f"  {title}")
        lines.extend(_row(item, color, width) for item in items)
    lines.append(rule)
    strict = report.strict_findings()
    if strict:
        lines.append("  STRICT findings (behaviour beyond the course's contract: reported, never scored)")
        for item in strict:
            lines.append(f"    {item.id:<24} {_clip(item.strict.explanation, width - 30)}")  # type: ignore[union-attr]
    counts = report.test_counts()
    score = f"score {_pts(report.score)}/{_pts(report.max_score)} ({report.percent:.1f}%)"
    if report.extended_max_score:
        score += f"   extended {_pts(report.extended_score)}/{_pts(report.extended_max_score)}"
    score += f"   STRICT findings: {len(strict)}"
    score += f"   audit: {report.audit_status}" + (f" ({len(report.audit)} findings)" if report.audit else "")
    lines.append("  " + score)
    order = [str(o) for o in Outcome]
    lines.append(
        "  tests: "
        + ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in order if counts.get(k))
        + f"   time {report.duration_s:.1f} s"
    )
    for finding in report.audit[:10]:
        during = f" during {finding['adapter_function']}" if finding.get("adapter_function") else ""
        hint = " [reported by the submission's process]" if str(finding.get("source", "")).startswith("worker") else ""
        lines.append(
            f"  audit: {finding.get('function')} ({finding.get('kind')}{during}) at {finding.get('where')}{hint}"
        )
    if len(report.audit) > 10:
        lines.append(f"  audit: ... {len(report.audit) - 10} more in results.json")
    for warning in report.warnings:
        lines.append(_paint(f"  warning: {warning}", "timeout", color))
    if report.compromised:
        lines.append(_paint("  COMPROMISED: the results cannot be trusted:", "error", color))
        lines.extend(f"    - {r}" for r in report.compromised_reasons[:20])
    verdict = "PASS" if report.passed else "FAIL"
    lines.append(_paint(f"  verdict: {verdict}", "pass" if report.passed else "fail", color))
    lines.append("  the rule of an item: lmspec spec ITEM; every message in full: results.json")
    return "\n".join(lines)


def _clip(text: str, room: int) -> str:
    text = text.replace("\n", " ")
    room = max(20, room)
    return text if len(text) <= room else text[: room - 3] + "..."


def _row(item: ItemResult, color: bool, width: int) -> str:
    scored = item.group in (Group.CORE, Group.EXTENDED)
    pts = f"{_pts(item.points)}/{_pts(item.max_points)}" if scored else "-"
    status = _paint(f"{item.status:<16}", item.status, color)
    return f"  {item.id:<26} {status} {pts:>9} {_strict_cell(item):>10}  {_clip(item.explanation, width - 70)}"


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
        f"    judge start-up (Python, pytest, torch, the suite) {s('judge_startup_s')}",
        f"    collection                                        {s('collection_s')}",
        f"    until the first result (worker start-up)          {s('until_first_result_s')}",
        f"    tests                                             {s('tests_wall_s')}",
        f"    after the judge (scoring, reports)                {s('after_judge_s')}",
        f"    total                                             {s('total_s')}",
        f"  worker starts: {len(starts)} ({', '.join(f'{x:.2f}' for x in starts)} s)",
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


_SKIPS = (Outcome.SKIPPED, Outcome.NOT_IMPLEMENTED, Outcome.NOT_PROVIDED)


def write_junit(report: GradeReport, path: Path) -> None:
    counts = report.test_counts()
    root = ET.Element(
        "testsuites",
        name=f"lmspec grade: {report.implementation['name']}",
        tests=str(sum(counts.values())),
        failures=str(counts.get("failed", 0)),
        errors=str(counts.get("error", 0) + counts.get("timeout", 0)),
        skipped=str(sum(counts.get(str(o), 0) for o in _SKIPS)),
        time=f"{report.duration_s:.2f}",
    )
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
