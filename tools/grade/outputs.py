"""The files of one graded submission, written from its GradeReport: JUnit
XML, the Gradescope file (with the course's visibility and leaderboard from
the points table), report.html, and results.json last, atomically, so that
a results.json on disk means the others are complete (the batch resumes on
that). Used by ``lmspec grade`` (one submission) and by each batch task.
"""

import json
import os
from pathlib import Path
from typing import Any

from lmspec.tools.grade.gradescope import write_gradescope
from lmspec.tools.grade.html import render_report
from lmspec.tools.grade.points import PointsTable
from lmspec.tools.grade.report import write_junit
from lmspec.tools.grade.results import GradeReport

#: format -> the file it writes beside results.json
FILES = {
    "json": "results.json",
    "junit": "junit.xml",
    "gradescope": "gradescope_results.json",
    "html": "report.html",
}
SPEC_PAGE = "spec.html"


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_spec_page(folder: Path) -> Path:
    """``spec.html`` (``lmspec spec --html``): the page every report's item links point into."""
    from lmspec.tools.spec import render_html

    path = folder / SPEC_PAGE
    write_text_atomic(path, render_html())
    return path


def write_outputs(
    report: GradeReport,
    out: Path,
    formats: tuple[str, ...],
    points: PointsTable,
    *,
    batch: dict[str, Any] | None = None,
    spec_href: str = SPEC_PAGE,
) -> dict[str, Any]:
    """Write the chosen formats into ``out``; returns the results.json
    document (with ``batch`` added: content hash, worker, time)."""
    out.mkdir(parents=True, exist_ok=True)
    data = report.to_json()
    if batch is not None:
        data["batch"] = batch
    if "junit" in formats:
        write_junit(report, out / FILES["junit"])
    if "gradescope" in formats:
        write_gradescope(report, out / FILES["gradescope"], points)
    if "html" in formats:
        write_text_atomic(out / FILES["html"], render_report(data, spec_href=spec_href))
    if "json" in formats:
        write_text_atomic(out / FILES["json"], json.dumps(data, indent=1, default=str) + "\n")
    return data
