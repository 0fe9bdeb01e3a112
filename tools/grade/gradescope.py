"""The Gradescope autograder file (``gradescope_results.json``): one test per
spec item, the course's visibility per item and an optional leaderboard (both
from the ``--points`` file, tools/grade/points.py), and a validator for the
fields Gradescope documents.

Gradescope's format, as its "Autograder Specifications" page documents it
(https://gradescope-autograders.readthedocs.io/en/latest/specs/, "Output
format", "Controlling Test Case Visibility", "Test case status", "Output
String Formatting"; leaderboards: .../latest/leaderboards/):

    top level   score (number; required unless every test has one), execution_time
                (seconds), output, output_format, test_output_format,
                test_name_format, visibility, stdout_visibility, extra_data (object),
                tests (list; required without a top-level score), leaderboard (list)
    a test      score, max_score, status ("passed" | "failed"), name, name_format,
                number, output, output_format, tags (list of strings), visibility,
                extra_data (object)
    visibility  "visible" (default), "hidden", "after_due_date", "after_published"
    formats     "text", "simple_format", "html", "md", "ansi"
    leaderboard [{"name": str, "value": number or string, "order": "asc" | "desc"}]
"""

import json
import math
from pathlib import Path
from typing import Any

from lmspec.conformance.outcomes import Outcome
from lmspec.tools.grade.points import LEADERBOARD_COLUMNS, VISIBILITIES, PointsTable
from lmspec.tools.grade.results import GradeReport, Group, Status, _num

FORMATS = ("text", "simple_format", "html", "md", "ansi")
STATUSES = ("passed", "failed")
_TOP = {
    "score": "number",
    "execution_time": "number",
    "output": "string",
    "output_format": "format",
    "test_output_format": "format",
    "test_name_format": "format",
    "visibility": "visibility",
    "stdout_visibility": "visibility",
    "extra_data": "object",
    "tests": "tests",
    "leaderboard": "leaderboard",
}
_TEST = {
    "score": "number",
    "max_score": "number",
    "status": "status",
    "name": "string",
    "name_format": "format",
    "number": "string",
    "output": "string",
    "output_format": "format",
    "tags": "tags",
    "visibility": "visibility",
    "extra_data": "object",
}


class InvalidGradescope(ValueError):
    """A Gradescope results document that breaks the documented format."""


def _items(n: int) -> str:
    return f"{n} item{'' if n == 1 else 's'}"


def _pts(x: float) -> str:
    value = _num(x)
    return str(value) if isinstance(value, int) else f"{value:.1f}"


def _check(value: Any, kind: str, where: str) -> list[str]:
    if kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return [] if ok else [f"{where}: must be a finite number, got {value!r}"]
    if kind == "string":
        return [] if isinstance(value, str) else [f"{where}: must be a string, got {type(value).__name__}"]
    if kind == "object":
        return [] if isinstance(value, dict) else [f"{where}: must be an object, got {type(value).__name__}"]
    if kind in ("format", "visibility", "status"):
        allowed = {"format": FORMATS, "visibility": VISIBILITIES, "status": STATUSES}[kind]
        return [] if value in allowed else [f"{where}: must be one of {', '.join(allowed)}, got {value!r}"]
    if kind == "tags":
        ok = isinstance(value, list) and all(isinstance(t, str) for t in value)
        return [] if ok else [f"{where}: must be a list of strings, got {value!r}"]
    raise AssertionError(kind)


def validate(document: Any) -> list[str]:
    """What in ``document`` breaks Gradescope's documented results.json
    format (the module docstring); an empty list when it is valid."""
    if not isinstance(document, dict):
        return [f"the document must be a JSON object, got {type(document).__name__}"]
    problems = []
    try:
        json.dumps(document, allow_nan=False)
    except (TypeError, ValueError) as exc:
        problems.append(f"not strict JSON: {exc}")
    for key, value in document.items():
        kind = _TOP.get(key)
        if kind is None:
            problems.append(f"{key}: not a documented top-level field")
        elif kind == "tests":
            problems += _validate_tests(value)
        elif kind == "leaderboard":
            problems += _validate_leaderboard(value)
        else:
            problems += _check(value, kind, key)
    tests = document.get("tests")
    if "score" not in document:
        if not isinstance(tests, list) or not tests:
            problems.append("score: required when there are no tests")
        elif any(isinstance(t, dict) and "score" not in t for t in tests):
            problems.append("score: required at the top level unless every test has a score")
    return problems


def _validate_tests(tests: Any) -> list[str]:
    if not isinstance(tests, list):
        return [f"tests: must be a list, got {type(tests).__name__}"]
    problems = []
    for n, test in enumerate(tests):
        where = f"tests[{n}]"
        if not isinstance(test, dict):
            problems.append(f"{where}: must be an object")
            continue
        for key, value in test.items():
            kind = _TEST.get(key)
            if kind is None:
                problems.append(f"{where}.{key}: not a documented test field")
            else:
                problems += _check(value, kind, f"{where}.{key}")
    return problems


def _validate_leaderboard(board: Any) -> list[str]:
    if not isinstance(board, list):
        return [f"leaderboard: must be a list, got {type(board).__name__}"]
    problems = []
    for n, entry in enumerate(board):
        where = f"leaderboard[{n}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be an object")
            continue
        if not isinstance(entry.get("name"), str) or not entry.get("name"):
            problems.append(f"{where}.name: required, a non-empty string")
        value = entry.get("value")
        if "value" not in entry:
            problems.append(f"{where}.value: required")
        elif isinstance(value, bool) or not isinstance(value, int | float | str):
            problems.append(f"{where}.value: must be a number or a string, got {value!r}")
        if "order" in entry and entry["order"] not in ("asc", "desc"):
            problems.append(f"{where}.order: must be asc or desc, got {entry['order']!r}")
        problems += [
            f"{where}.{k}: not a documented leaderboard field" for k in entry if k not in ("name", "value", "order")
        ]
    return problems


def build(report: GradeReport, points: PointsTable | None = None) -> dict[str, Any]:
    """The Gradescope document of one graded report: core items carry their
    points; extended items and the audit are shown with max_score 0."""
    points = points or PointsTable()
    strict_items = report.strict_findings()
    payload: dict[str, Any] = {
        "score": _num(report.score),
        "execution_time": round(report.duration_s),
        "output": _summary(report, strict_items),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": points.default_visibility,
        "stdout_visibility": "hidden",
        "tests": [_test(report, item, item in strict_items, points) for item in report.items],
    }
    if points.leaderboard:
        payload["leaderboard"] = _leaderboard(report, points.leaderboard)
    return payload


def _test(report: GradeReport, item: Any, strict_finding: bool, points: PointsTable) -> dict[str, Any]:
    """One item as a Gradescope test: its points (core items only) and what went wrong."""
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
    if strict_finding and item.strict is not None:
        output.append("STRICT (behaviour beyond the course's contract; reported, not scored):")
        bad = [t for t in item.strict.tests if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)]
        output.extend(f"  {t.short}: {t.summary}" for t in bad[:10])
    return {
        "name": f"{item.id} {item.title}",
        "number": item.id,
        "score": _num(item.points) if counted and not report.compromised else 0,
        "max_score": _num(item.max_points) if counted else 0,
        "status": "passed" if item.status == Status.PASS else "failed",
        "output": "\n".join(output),
        "visibility": points.visibility_of(item.id),
    }


def _summary(report: GradeReport, strict_items: list[Any]) -> str:
    """The document's top text: score, extended, STRICT, audit, tests, verdict."""
    findings = report.strict_finding_count()
    summary = [
        f"lmspec ({report.implementation.get('profile') or 'cs336'} profile): {report.score_line()}",
        f"extended (optional): {_pts(report.extended_score)}/{_pts(report.extended_max_score)}",
        f"STRICT findings (not scored): {findings}" + (f" (in {_items(len(strict_items))})" if findings else ""),
        f"from-scratch audit: {report.audit_status}",
        report.tests_line(),
        f"verdict: {report.verdict_line()}",
    ]
    if report.error:
        summary.insert(0, f"ERROR: {report.error}")
    if report.compromised:
        summary.insert(0, "COMPROMISED: " + "; ".join(report.compromised_reasons[:5]))
    return "\n".join(summary)


def _leaderboard(report: GradeReport, columns: Any) -> list[dict[str, Any]]:
    values = {
        "score": _num(report.score),
        "percent": round(report.percent, 2),
        "extended_score": _num(report.extended_score),
        "time": round(report.duration_s, 1),
    }
    return [
        {"name": LEADERBOARD_COLUMNS[c][0], "value": values[c], "order": LEADERBOARD_COLUMNS[c][1]} for c in columns
    ]


def write_gradescope(report: GradeReport, path: Path, points: PointsTable | None = None) -> None:
    """Write the Gradescope file, checked against the documented format first
    (an invalid document is a bug of lmspec's: InvalidGradescope)."""
    payload = build(report, points)
    problems = validate(payload)
    if problems:
        raise InvalidGradescope("; ".join(problems))
    path.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")
