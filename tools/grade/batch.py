"""``--batch DIR``: grade a whole course on Dask distributed
(tools/grade/distributed.py), resumably, and write per submission its
results (results.json, junit.xml, gradescope_results.json, report.html)
under ``--out/<name>/``, then ``summary.csv`` (one row per submission),
``dashboard.html`` (tools/grade/dashboard.py), ``spec.html`` and
``batch.json`` (this run: workers, wall time, throughput, load average).

A submission is a folder of DIR (a repository with ``tests/adapters.py`` or
``adapters.py``, also one level down) or a single ``*.py`` adapters file in
DIR. Its content hash (its archive plus the settings that change results)
is recorded in its results.json (``batch.content_hash``): a later run with
the same hash reuses those results instead of grading again, unless
``--regrade``. results.json is written last, so an interrupted batch leaves
either complete results or none for a submission.
"""

import csv
import datetime
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmspec.conformance.plain import plain
from lmspec.tools.grade.files import inside
from lmspec.tools.grade.points import PointsTable


@dataclass(frozen=True)
class Submission:
    name: str
    path: Path  # a folder, or a single adapters file


def find_submissions(folder: Path) -> list[Submission]:
    """Every submission in ``folder``: its sub-folders and its ``*.py`` files
    (a file named like a folder keeps its ``.py`` in its name)."""
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith((".", "_")))
    dirs = [p for p in entries if p.is_dir()]
    files = [p for p in entries if p.is_file() and p.suffix == ".py"]
    taken = {p.name for p in dirs}
    subs = [Submission(p.name, p) for p in dirs]
    subs += [Submission(p.stem if p.stem not in taken else p.name, p) for p in files]
    return sorted(subs, key=lambda s: s.name)


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
    # added by the Dask batch
    "strict_findings",
    "reused",
    "worker",
    "content_hash",
    "report",
)


def row_from_results(name: str, data: dict[str, Any] | None, *, error: str | None = None) -> dict[str, Any]:
    """The summary row of one submission, from its results.json (None: not graded)."""
    row: dict[str, Any] = dict.fromkeys(CSV_FIELDS, "")
    # a file name or a worker's message: printed, kept in the CSV
    row.update(name=plain(name), error=plain(error or ""))
    if data is None:
        row.update(score=0, compromised=False, passed=False, duration_s=0.0)
        return row
    statuses = [i.get("status") for i in data.get("items") or [] if i.get("group") == "core"]
    batch = data.get("batch") or {}
    row.update(
        score=data.get("score"),
        max_score=data.get("max_score"),
        percent=round(float(data.get("percent") or 0.0), 1),
        extended_score=data.get("extended_score"),
        extended_max_score=data.get("extended_max_score"),
        items_pass=statuses.count("pass"),
        items_fail=statuses.count("fail"),
        items_not_implemented=statuses.count("not implemented"),
        items_error=statuses.count("error"),
        items_timeout=statuses.count("timeout"),
        audit_findings=len(data.get("audit") or []),
        duration_s=round(float(batch.get("task_s") or data.get("duration_s") or 0.0), 1),
        compromised=bool(data.get("compromised")),
        passed=bool(data.get("passed")),
        error=data.get("error") or "",
        adapter=(data.get("implementation") or {}).get("adapter", ""),
        strict_findings=data.get("strict_findings", 0),
        worker=batch.get("worker", ""),
        content_hash=batch.get("content_hash", ""),
        report=f"{name}/report.html",
    )
    return row


def _load_results(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / "results.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _store(out: Path, name: str, files: dict[str, bytes]) -> None:
    """Replace ``out/name`` with the files a worker sent back: written into a
    staging folder first, results.json last, then swapped in."""
    final = inside(out, out / name)
    staging, old = inside(out, out / f".{name}.partial"), inside(out, out / f".{name}.old")
    for stale in (staging, old):
        shutil.rmtree(stale, ignore_errors=True)
    for rel in sorted(files, key=lambda r: r == "results.json"):
        path = inside(staging, staging / rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[rel])
    if final.exists():
        os.replace(final, old)
    os.replace(staging, final)
    shutil.rmtree(old, ignore_errors=True)


def _fixtures_folder(explicit: str | None) -> Path | None:
    """The oracle files the client would use (they travel to the workers):
    --fixtures, else LMSPEC_FIXTURES, else the cache (``lmspec fixtures fetch``),
    else ../shared/fixtures beside lmspec."""
    from lmspec.conformance.fixtures import FIXTURES, cache_folder
    from lmspec.tools.grade.files import REPO

    for candidate in (explicit, os.environ.get("LMSPEC_FIXTURES")):
        if candidate and Path(candidate).expanduser().is_dir():
            return Path(candidate).expanduser().resolve()
    # the cache and the shared folder only when they hold an oracle file (a cache may exist empty)
    for folder in (cache_folder(), REPO.parent / "shared" / "fixtures"):
        if any((folder / name).is_file() for name in FIXTURES):
            return folder.resolve()
    return None


class _Progress:
    """tqdm with an ETA on a terminal; a line per submission otherwise."""

    def __init__(self, total: int, enabled: bool):
        self.enabled, self.total, self.done, self.bar = enabled, total, 0, None
        self.start = time.monotonic()
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="grading", unit="sub", file=sys.stderr)

    def __call__(self, row: dict[str, Any]) -> None:
        self.done += 1
        note = f"{row['name']}: {row['score']}/{row['max_score']}" + (" (error)" if row["error"] else "")
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(1)
        elif self.enabled:
            elapsed = time.monotonic() - self.start
            eta = elapsed / self.done * (self.total - self.done)
            print(f"[{self.done}/{self.total}] {note}  ({elapsed:.0f} s, ETA {eta:.0f} s)", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def grade_batch(
    folder: Path,
    *,
    out: Path,
    settings: Any,
    points: PointsTable | None = None,
    formats: tuple[str, ...] = ("json", "junit", "gradescope", "html"),
    task: Callable[..., Any] | None = None,
) -> int:
    """Grade every submission in ``folder`` on Dask with ``settings``
    (conformance/options.py: --workers, --scheduler, --regrade, --quiet...);
    exit status 0 when every submission passes. ``task`` replaces the Dask
    task (tests inject faults)."""
    quiet = settings.quiet
    from lmspec.tools.grade import distributed as dist

    points = points or PointsTable.default(settings.profile)
    subs = find_submissions(folder)
    if not subs:
        raise ValueError(f"--batch {folder}: no submission folders or .py files")
    out.mkdir(parents=True, exist_ok=True)
    payload = dist.make_payload(settings, points=points, formats=formats, fixtures=_fixtures_folder(settings.fixtures))
    start = time.monotonic()
    stats: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "submissions": len(subs),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }
    rows, results, todo = _reuse_unchanged(subs, out, payload, regrade=settings.regrade)
    stats.update(pack_s=round(time.monotonic() - start, 2), reused=len(subs) - len(todo), graded=len(todo))
    if not quiet:
        print(
            f"{len(subs)} submissions: {len(subs) - len(todo)} already graded with these settings "
            f"(unchanged), {len(todo)} to grade",
            file=sys.stderr,
        )
    if todo:
        run_start = time.monotonic()
        _run(
            todo,
            out,
            payload,
            rows,
            results,
            stats,
            workers=settings.workers,
            scheduler=settings.scheduler,
            quiet=quiet,
            task=task,
        )
        stats["grading_wall_s"] = round(time.monotonic() - run_start, 2)  # from the cluster's start to the last result
        stats["per_hour"] = round(3600 * len(todo) / stats["grading_wall_s"], 1)
    stats["errors"] = sum(bool(rows[s.name]["error"]) for s in subs)
    stats["wall_s"] = round(time.monotonic() - start, 2)
    stats["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    summary = _write_batch_outputs(out, folder, subs, rows, results, stats)
    if not quiet:
        _print_table(subs, rows)
        print(f"summary: {summary}\ndashboard: {out / 'dashboard.html'}")
    return 0 if all(r["passed"] is True for r in rows.values()) else 1


def _reuse_unchanged(
    subs: list[Submission], out: Path, payload: Any, *, regrade: bool
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any] | None], list[tuple[Submission, Any, str]]]:
    """The rows and results of submissions already graded with these settings and
    this content (unless ``regrade``), and the rest to grade: (submission, archive, digest)."""
    from lmspec.tools.grade import distributed as dist

    rows: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, Any] | None] = {}
    todo: list[tuple[Submission, Any, str]] = []
    for sub in subs:
        packed = dist.pack(sub.path)
        digest = dist.content_hash(packed, payload)
        previous = _load_results(out / sub.name)
        if not regrade and previous is not None and (previous.get("batch") or {}).get("content_hash") == digest:
            rows[sub.name] = row_from_results(sub.name, previous) | {"reused": True}
            results[sub.name] = previous
        else:
            todo.append((sub, packed, digest))
    return rows, results, todo


def _write_batch_outputs(
    out: Path,
    folder: Path,
    subs: list[Submission],
    rows: dict[str, dict[str, Any]],
    results: dict[str, dict[str, Any] | None],
    stats: dict[str, Any],
) -> Path:
    """batch.json, the spec page, summary.csv (returned) and dashboard.html."""
    from lmspec.tools.grade.dashboard import Entry, render_dashboard
    from lmspec.tools.grade.outputs import write_spec_page, write_text_atomic

    write_text_atomic(out / "batch.json", json.dumps(stats, indent=1) + "\n")
    write_spec_page(out)
    summary = out / "summary.csv"
    tmp = summary.with_name(".summary.csv.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for sub in subs:
            writer.writerow(rows[sub.name])
    os.replace(tmp, summary)
    entries = [
        Entry(
            s.name,
            rows[s.name],
            results.get(s.name),
            f"{s.name}/report.html" if (out / s.name / "report.html").is_file() else None,
        )
        for s in subs
    ]
    page = render_dashboard(entries, title=f"lmspec batch: {folder.name}", run=stats)
    write_text_atomic(out / "dashboard.html", page)
    return summary


def _print_table(subs: list[Submission], rows: dict[str, dict[str, Any]]) -> None:
    for sub in subs:
        r = rows[sub.name]
        flag = "  COMPROMISED" if r["compromised"] is True else ""
        note = f"  ({r['error']})" if r["error"] else ""
        print(f"{r['name']:<30} {r['score']}/{r['max_score']}{flag}{note}")


def _run(
    todo: list[tuple[Submission, Any, str]],
    out: Path,
    payload: Any,
    rows: dict[str, dict[str, Any]],
    results: dict[str, dict[str, Any] | None],
    stats: dict[str, Any],
    *,
    workers: int | None,
    scheduler: str | None,
    quiet: bool,
    task: Callable[..., Any] | None,
) -> None:
    from distributed import as_completed

    from lmspec.tools.grade import distributed as dist

    started = time.monotonic()
    client, cluster = dist.open_client(scheduler, workers or os.cpu_count() or 1, quiet=quiet)
    stats["cluster_start_s"] = round(time.monotonic() - started, 2)
    stats["workers"] = dist.total_threads(client)
    stats["scheduler"] = scheduler or "LocalCluster"
    progress = _Progress(len(todo), enabled=not quiet)
    try:
        client.register_plugin(dist.stop_judges_plugin())
        shared = client.scatter(payload, broadcast=True)
        futures = {}
        for n, (sub, packed, digest) in enumerate(todo):
            future = client.submit(
                task or dist.grade_archive,
                packed.archive,
                sub.name,
                digest,
                shared,
                key=f"lmspec-grade-{n}-{digest[:16]}",
                retries=1,
                pure=False,
                priority=-n,  # in order: the first submitted finish first
            )
            futures[future] = sub
        for future in as_completed(futures):
            sub = futures.pop(future)
            rows[sub.name], results[sub.name] = _collect(future, sub.name, out)
            rows[sub.name]["reused"] = False
            progress(rows[sub.name])
    finally:
        progress.close()
        client.close()
        if cluster is not None:
            cluster.close()


def _collect(future: Any, name: str, out: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A finished task's row and results (its files stored under ``out/name``);
    a task that failed everywhere is a row with a grader error, never the batch's end."""
    try:
        result = future.result()
    except Exception as exc:
        kind = type(exc).__name__
        why = "its worker died every time it ran" if kind == "KilledWorker" else f"{kind}: {exc}"
        return row_from_results(name, None, error=f"grader error: {why}"), None
    if result.files.get("results.json"):
        _store(out, name, result.files)
        data = _load_results(out / name)
        return row_from_results(name, data), data
    row = row_from_results(name, None, error=result.error or "no results")
    row.update(duration_s=round(result.seconds, 1), worker=result.worker)
    return row, None
