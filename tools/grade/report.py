"""Render a GradeReport: the terminal table, results.json, JUnit XML and a
Gradescope results.json."""

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from tools.grade.results import PASS, GradeReport, ItemResult, _num

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


def _pts(x: float) -> str:
    value = _num(x)
    return str(value) if isinstance(value, int) else f"{value:.1f}"


def _paint(text: str, status: str, color: bool) -> str:
    code = _STATUS_COLOR.get(status)
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text


def render_table(report: GradeReport, *, color: bool = False, width: int | None = None) -> str:
    width = width or shutil.get_terminal_size((120, 40)).columns
    impl = report.implementation
    lines = [f"lmspec grade: {impl['name']}  ({impl.get('origin') or impl['adapter']})"]
    if report.error:
        lines.append(f"  ERROR: {report.error}")
    header = f"  {'item':<22} {'status':<16} {'points':>9}  explanation"
    lines.append(header)
    lines.append("  " + "-" * (min(width, 140) - 2))
    groups = (
        ("core", None),
        ("extended", "extended (optional, scored separately)"),
        ("should", "SHOULD rules (reported, not in the score)"),
        ("audit", "from-scratch audit (SPEC §0, SHOULD; not in the score)"),
    )
    for group, title in groups:
        items = report.group(group)
        if not items:
            continue
        if title:
            lines.append(f"  {title}")
        for item in items:
            lines.append(_row(item, color, width))
    counts = report.test_counts()
    lines.append("  " + "-" * (min(width, 140) - 2))
    score = f"score {_pts(report.score)}/{_pts(report.max_score)} ({report.percent:.1f}%)"
    if report.extended_max_score:
        score += f"   extended {_pts(report.extended_score)}/{_pts(report.extended_max_score)}"
    score += f"   audit: {report.audit_status}" + (f" ({len(report.audit)} findings)" if report.audit else "")
    lines.append("  " + score)
    order = ("passed", "failed", "error", "timeout", "not_implemented", "not_provided", "skipped")
    lines.append(
        "  tests: "
        + ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in order if counts.get(k))
        + f"   time {report.duration_s:.1f} s"
    )
    for finding in report.audit[:10]:
        during = f" during {finding['adapter_function']}" if finding.get("adapter_function") else ""
        what = f"{finding.get('function')} ({finding.get('kind')}{during})"
        lines.append(f"  audit: {what} at {finding.get('where')}")
    if len(report.audit) > 10:
        lines.append(f"  audit: ... {len(report.audit) - 10} more in results.json")
    for warning in report.warnings:
        lines.append(f"  warning: {warning}")
    if report.compromised:
        lines.append(_paint("  COMPROMISED: the results cannot be trusted:", "error", color))
        lines.extend(f"    - {r}" for r in report.compromised_reasons[:20])
    verdict = "PASS" if report.passed else "FAIL"
    lines.append(_paint(f"  verdict: {verdict}", "pass" if report.passed else "fail", color))
    return "\n".join(lines)


def _row(item: ItemResult, color: bool, width: int) -> str:
    pts = "-" if item.group in ("audit", "should") else f"{_pts(item.points)}/{_pts(item.max_points)}"
    status = _paint(f"{item.status:<16}", item.status, color)
    room = max(20, width - 55)
    why = item.explanation.replace("\n", " ")
    if len(why) > room:
        why = why[: room - 3] + "..."
    return f"  {item.id:<22} {status} {pts:>9}  {why}"


def write_json(report: GradeReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=1, default=str) + "\n")


def _clean(text: str) -> str:
    return _XML_BAD.sub("?", text)


def write_junit(report: GradeReport, path: Path) -> None:
    counts = report.test_counts()
    root = ET.Element(
        "testsuites",
        name=f"lmspec grade: {report.implementation['name']}",
        tests=str(sum(counts.values())),
        failures=str(counts.get("failed", 0)),
        errors=str(counts.get("error", 0) + counts.get("timeout", 0)),
        skipped=str(counts.get("skipped", 0) + counts.get("not_implemented", 0) + counts.get("not_provided", 0)),
        time=f"{report.duration_s:.2f}",
    )
    for item in report.items:
        c = item.counts()
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{item.id} {item.title}",
            tests=str(len(item.tests)),
            failures=str(c.get("failed", 0)),
            errors=str(c.get("error", 0) + c.get("timeout", 0)),
            skipped=str(c.get("skipped", 0) + c.get("not_implemented", 0) + c.get("not_provided", 0)),
            time=f"{sum(t.duration_s for t in item.tests):.2f}",
        )
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("status", item.status),
            ("group", item.group),
            ("points", _pts(item.points)),
            ("max_points", _pts(item.max_points)),
        ):
            ET.SubElement(props, "property", name=key, value=value)
        for t in item.tests:
            path_part, _, name = t.nodeid.partition("::")
            case = ET.SubElement(
                suite,
                "testcase",
                classname=item.id,
                name=_clean(name or t.nodeid),
                file=path_part,
                time=f"{t.duration_s:.3f}",
            )
            msg = _clean(t.message)
            if t.outcome == "failed":
                ET.SubElement(case, "failure", message=msg, type="failure").text = msg
            elif t.outcome in ("error", "timeout"):
                ET.SubElement(case, "error", message=msg, type=t.outcome).text = msg
            elif t.outcome in ("skipped", "not_implemented", "not_provided"):
                ET.SubElement(case, "skipped", message=msg, type=t.outcome)
    if report.compromised:
        suite = ET.SubElement(root, "testsuite", name="grader integrity", tests="1", failures="1", errors="0")
        case = ET.SubElement(suite, "testcase", classname="integrity", name="run_not_compromised")
        text = _clean("\n".join(report.compromised_reasons))
        ET.SubElement(case, "failure", message="the run is compromised", type="compromised").text = text
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def write_gradescope(report: GradeReport, path: Path) -> None:
    """Gradescope autograder format: one test per spec item. Core items carry
    their points; extended items and the audit are shown with max_score 0."""
    tests = []
    for item in report.items:
        counted = item.group == "core"
        output = [f"status: {item.status}"]
        if item.explanation:
            output.append(item.explanation)
        if item.group == "extended":
            output.append(f"optional item, not in the score: {_pts(item.points)}/{_pts(item.max_points)}")
        if item.group == "audit" and report.audit:
            output.extend(f"{f.get('function')} ({f.get('kind')}) at {f.get('where')}" for f in report.audit)
        elif item.group == "audit":
            output.append("no forbidden torch definitions found")
        bad = [t for t in item.tests if t.outcome not in ("passed", "skipped")]
        output.extend(f"  {t.outcome}: {t.nodeid.split('::', 1)[-1]}: {t.message}" for t in bad[:20])
        tests.append(
            {
                "name": f"{item.id} {item.title}",
                "number": item.id,
                "score": _num(item.points) if counted and not report.compromised else 0,
                "max_score": _num(item.max_points) if counted else 0,
                "status": "passed" if item.status == PASS else "failed",
                "output": "\n".join(output),
                "visibility": "visible",
            }
        )
    summary = [
        f"lmspec: {_pts(report.score)}/{_pts(report.max_score)} ({report.percent:.1f}%)",
        f"extended (optional): {_pts(report.extended_score)}/{_pts(report.extended_max_score)}",
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
