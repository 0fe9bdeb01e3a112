"""``--batch DIR``: grade every submission folder in DIR, several at a time,
and write ``summary.csv`` (one row per submission)."""

import csv
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from lmspec.tools.grade.grading import NotGraded, grade
from lmspec.tools.grade.judge import JudgeOptions
from lmspec.tools.grade.results import GradeReport

ADAPTER_CANDIDATES = ("tests/adapters.py", "adapters.py")


def find_adapter(folder: Path) -> Path | None:
    """The adapters file of one submission folder (also one level down, as
    archives often unpack into a single top folder)."""
    for base in (
        folder,
        *sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
    ):
        for rel in ADAPTER_CANDIDATES:
            if (base / rel).is_file():
                return base / rel
    return None


CSV_FIELDS = (
    "name",
    "score",
    "max_score",
    "percent",
    "extended_score",
    "extended_max_score",
    "items_pass",
    "items_fail",
    "items_not_implemented",
    "items_error",
    "items_timeout",
    "audit_findings",
    "duration_s",
    "compromised",
    "passed",
    "error",
    "adapter",
)


def _row(name: str, report: GradeReport | None, adapter: Path | None, error: str | None, seconds: float) -> dict:
    row: dict[str, Any] = dict.fromkeys(CSV_FIELDS, "")
    row.update(name=name, adapter=str(adapter or ""), duration_s=round(seconds, 1), error=error or "")
    if report is None:
        row.update(score=0, compromised=False, passed=False)
        return row
    statuses = [i.status for i in report.items if i.group == "core"]
    row.update(
        score=report.to_json()["score"],
        max_score=report.to_json()["max_score"],
        percent=round(report.percent, 1),
        extended_score=report.to_json()["extended_score"],
        extended_max_score=report.to_json()["extended_max_score"],
        items_pass=statuses.count("pass"),
        items_fail=statuses.count("fail"),
        items_not_implemented=statuses.count("not implemented"),
        items_error=statuses.count("error"),
        items_timeout=statuses.count("timeout"),
        audit_findings=len(report.audit),
        compromised=report.compromised,
        passed=report.passed,
        error=report.error or "",
    )
    return row


def grade_batch(
    folder: Path,
    *,
    out: Path,
    jobs: int,
    options: JudgeOptions,
    quiet: bool = False,
    **grade_options: Any,
) -> int:
    """Grade each submission folder (``jobs`` at a time, one process each);
    exit status 0 when every submission passes. ``grade_options`` go to grade()."""
    subs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subs:
        raise ValueError(f"--batch {folder}: no submission folders")
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict] = {}

    def one(sub: Path) -> dict:
        t0 = time.monotonic()
        adapter = find_adapter(sub)
        if adapter is None:
            return _row(sub.name, None, None, f"no {' or '.join(ADAPTER_CANDIDATES)} found", 0.0)
        try:
            report = grade(str(adapter), out=out / sub.name, options=options, **grade_options)
        except NotGraded as exc:
            return _row(sub.name, None, adapter, f"not graded: {exc}", time.monotonic() - t0)
        except Exception as exc:  # one broken submission never stops the batch
            error = f"grader error: {type(exc).__name__}: {exc}"
            return _row(sub.name, None, adapter, error, time.monotonic() - t0)
        return _row(sub.name, report, adapter, None, time.monotonic() - t0)

    bar = None
    if not quiet:
        from tqdm import tqdm

        bar = tqdm(total=len(subs), desc="submissions", unit="sub", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for fut in as_completed([pool.submit(one, sub) for sub in subs]):
            row = fut.result()
            rows[row["name"]] = row
            if bar is not None:
                bar.set_postfix_str(f"{row['name']}: {row['score']}/{row['max_score']}")
                bar.update(1)
    if bar is not None:
        bar.close()
    summary = out / "summary.csv"
    with open(summary, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for sub in subs:
            writer.writerow(rows[sub.name])
    if not quiet:
        for sub in subs:
            r = rows[sub.name]
            flag = "  COMPROMISED" if r["compromised"] is True else ""
            note = f"  ({r['error']})" if r["error"] else ""
            print(f"{sub.name:<30} {r['score']}/{r['max_score']}{flag}{note}")
        print(f"summary: {summary}")
    return 0 if all(r["passed"] is True for r in rows.values()) else 1
