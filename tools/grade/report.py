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
  "STRICT (reported, not scored)" paragraph.
"""

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from lmspec.conformance.outcomes import Outcome
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


def write_json(report: GradeReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=1, default=str) + "\n")


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


def write_gradescope(report: GradeReport, path: Path) -> None:
    """Gradescope autograder format: one test per spec item. Core items carry
    their points; extended items and the audit are shown with max_score 0."""
    tests = []
    for item in report.items:
        counted = item.group == Group.CORE
        output = [f"status: {item.status}"]
        if item.explanation:
            output.append(item.explanation)
        if item.group == Group.EXTENDED:
            output.append(f"optional item, not in the score: {_pts(item.points)}/{_pts(item.max_points)}")
        if item.group == Group.AUDIT and report.audit:
            output.extend(f"{f.get('function')} ({f.get('kind')}) at {f.get('where')}" for f in report.audit)
        elif item.group == Group.AUDIT:
            output.append("no forbidden torch definitions found")
        bad = [t for t in item.tests if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)]
        output.extend(f"  {t.outcome}: {t.short}: {t.summary}" for t in bad[:20])
        if item in report.strict_findings():
            output.append("STRICT (behaviour beyond the course's contract; reported, not scored):")
            bad = [t for t in item.strict.tests if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)]
            output.extend(f"  {t.short}: {t.summary}" for t in bad[:10])
        tests.append(
            {
                "name": f"{item.id} {item.title}",
                "number": item.id,
                "score": _num(item.points) if counted and not report.compromised else 0,
                "max_score": _num(item.max_points) if counted else 0,
                "status": "passed" if item.status == Status.PASS else "failed",
                "output": "\n".join(output),
                "visibility": "visible",
            }
        )
    summary = [
        f"lmspec: {_pts(report.score)}/{_pts(report.max_score)} ({report.percent:.1f}%)",
        f"extended (optional): {_pts(report.extended_score)}/{_pts(report.extended_max_score)}",
        f"STRICT findings (not scored): {len(report.strict_findings())}",
        f"from-scratch audit: {report.audit_status}",
    ]
    if report.error:
        summary.insert(0, f"ERROR: {report.error}")
    if report.compromised:
        summary.insert(0, "COMPROMISED: " + "; ".join(report.compromised_reasons[:5]))
    payload = {
        "score": _num(report.score),
        "execution_time": round(report.duration_s),
        "output": "\n".join(summary),
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")
