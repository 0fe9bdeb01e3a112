"""The files of one graded submission, written from its GradeReport: JUnit
XML, the Gradescope file (with the course's visibility and leaderboard from
the points table), report.html, and results.json last, atomically, so that
a results.json on disk means the others are complete (the batch resumes on
that). Used by ``lmspec grade`` (one submission) and by each batch task.
"""

import json
import os
import shutil
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
#: what the judge writes into ``--out``/logs (conformance/judge/launch.py)
LOGS = "logs"
LOG_FILES = frozenset({"judge-report.json", "progress.jsonl", "judge.log", "target.json", "tmp"})


class OutError(ValueError):
    """``--out`` cannot be used as it is (a usage error: one line, exit status 2)."""


def _ours(name: str) -> bool:
    """A name lmspec writes into an output folder (its files and their temporaries)."""
    return name in (*FILES.values(), SPEC_PAGE, LOGS) or (name.startswith(".") and name.endswith(".tmp"))


def _folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def claim_out(out: Path, graded: Path | None) -> None:
    """Make ``out`` an output folder that holds nothing but what this grading
    writes (issue 32): created when it does not exist; emptied when it holds
    only what lmspec writes there (an earlier grading's files, links with
    those names included: removed, never followed); refused when it holds
    anything else, or when it is (or holds) the graded submission ``graded``.
    Nothing in it is ever read or run: a submission may have shipped it."""
    where = out.resolve()
    if graded is not None and (where == graded.resolve() or graded.resolve().is_relative_to(where)):
        raise OutError(f"--out {out}: that folder holds the graded submission; choose a folder outside it")
    if where.exists() and not where.is_dir():
        raise OutError(f"--out {out}: not a folder")
    entries = list(where.iterdir()) if where.is_dir() else []
    logs = where / LOGS
    foreign = [e.name for e in entries if not _ours(e.name) or (_folder(e) and e.name != LOGS)]
    if _folder(logs):
        foreign += [
            f"{LOGS}/{e.name}" for e in logs.iterdir() if e.name not in LOG_FILES or _folder(e) != (e.name == "tmp")
        ]
    if foreign:
        raise OutError(
            f"--out {out}: holds {sorted(foreign)[0]!r}, which lmspec did not write (it writes "
            f"{', '.join(FILES.values())}, {SPEC_PAGE} and {LOGS}/ there): choose a new or empty folder"
        )
    for entry in entries:
        if _folder(entry):
            shutil.rmtree(entry)
        else:
            entry.unlink()
    where.mkdir(parents=True, exist_ok=True)


def claim_batch_out(out: Path, folder: Path) -> None:
    """A batch's ``out`` reads back earlier results (an unchanged submission is
    not graded again), so no submission may be able to write into it:
    refused when it is the batch folder, lies inside one of its submissions,
    or holds the batch folder. (A folder of ``folder`` whose name starts with
    ``.`` or ``_`` is no submission: ``--out batch/_grades`` is fine.)"""
    from lmspec.tools.grade.batch import find_submissions

    where, batch = out.resolve(), folder.resolve()
    if where == batch or batch.is_relative_to(where):
        raise OutError(f"--out {out}: that folder holds the batch; choose a folder outside it")
    for sub in find_submissions(batch):
        if where.is_relative_to(sub.path.resolve()):
            raise OutError(f"--out {out}: inside the submission {sub.name!r}; choose a folder outside the submissions")
    if where.exists() and not where.is_dir():
        raise OutError(f"--out {out}: not a folder")


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="backslashreplace")  # never fails on a name (issue 32)
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
