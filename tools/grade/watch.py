"""``lmspec grade --spec ITEMS --watch``: the loop of a person fixing one item.

The named items are graded, then graded again whenever a file of the
submission changes (its folder, polled: no dependency, any file system); after
each re-grade only what changed is printed: the items that pass now, those
still failing (with their message, which may have changed), and the new
failures. Ctrl-C stops it (a grading in flight is ended, its judge and
workers with it); the exit status is the last finished grading's (0 PASS,
1 otherwise; 2 when none finished).

Each re-grade is a fresh judge (the same sandbox and settings): a worker that
imported the submission once cannot be trusted to see its new code, and a
fresh one costs the judge's start-up (docs/students.md gives the time
measured).
"""

import datetime as _dt
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmspec import ROOT
from lmspec.conformance.plain import plain
from lmspec.conformance.target import Target
from lmspec.tools.grade.results import GradeReport, Status

#: Seconds between two looks at the submission's files.
POLL_S = 0.5
#: A change is graded once the files have been still this long (an editor writes in several steps).
SETTLE_S = 0.3
#: Files looked at, at most (a submission's data folder is not source; past this, the rest is not watched).
MAX_WATCHED_FILES = 20_000
#: Folders never looked into: caches and version control, not the submission's code.
SKIPPED_DIRS = {".git", "__pycache__", ".pytest_cache", ".hypothesis", ".venv", "venv", ".mypy_cache", ".ruff_cache"}


def watched_folder(target: Target) -> Path | None:
    """The folder whose files are the submission: its repository, the folder
    of its adapters file, lmspec's reference; None for another module name
    (its files are not known without importing it)."""
    if target.root is not None:
        return target.root
    if target.is_file:
        return Path(target.adapter).parent
    if target.is_reference:
        return ROOT / "reference"
    return None


def snapshot(folder: Path, skip: Path | None = None) -> dict[str, tuple[int, int]]:
    """(mtime in ns, size) of each regular file under ``folder`` (links are not followed)."""
    files: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and (skip is None or here / d != skip))
        for name in sorted(filenames):
            try:
                info = os.lstat(here / name)
            except OSError:
                continue
            files[str(here / name)] = (info.st_mtime_ns, info.st_size)
            if len(files) >= MAX_WATCHED_FILES:
                return files
    return files


def changed_files(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _first_line(text: str, limit: int = 160) -> str:
    line = plain(text).strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _state(report: GradeReport) -> dict[str, tuple[Status, str, str]]:
    return {i.id: (i.status, f"{i.points:g}/{i.max_points:g}", _first_line(i.explanation)) for i in report.items}


def changes(before: dict[str, tuple[Status, str, str]] | None, after: dict[str, tuple[Status, str, str]]) -> list[str]:
    """What to print after a grading: every item the first time; then only
    the items that pass now, those still failing, and the new failures."""
    lines = []
    for item, (status, points, why) in after.items():
        was = before.get(item) if before is not None else None
        passing = status == Status.PASS
        if before is None:
            label = "passing" if passing else str(status)
        elif passing:
            if was is not None and was[0] == Status.PASS:
                continue
            label = "passed now"
        elif was is None or was[0] == Status.PASS:
            label = "new failure"
        else:
            label = "still failing"
        line = f"  {label:<13} {item} ({points})"
        lines.append(line + (f": {status}: {why}" if not passing and why else ""))
    if before is not None and not lines:
        lines.append("  nothing changed: every item passes, as before")
    return lines


def watch(
    target: Target,
    run: Callable[[], GradeReport],
    *,
    out: Path,
    echo: Callable[[str], Any] = print,
    stop_after: int | None = None,
) -> int:
    """Grade with ``run``, then again after each change of the submission's
    files, until Ctrl-C (or ``stop_after`` gradings, for tests)."""
    say = echo
    echo = lambda line: say(plain(line))  # the folder's and the files' names are the submission's
    folder = watched_folder(target)
    if folder is None:
        raise ValueError("--watch needs a repository folder or an adapters file (a module name has no files to watch)")
    skip = out.resolve() if out.resolve().is_relative_to(folder.resolve()) else None
    previous = None
    last: GradeReport | None = None
    gradings = 0
    why = "first grading"
    try:
        echo(f"watching {folder} (Ctrl-C stops)")
        while True:
            seen = snapshot(folder, skip)
            started = time.monotonic()
            last = run()
            gradings += 1
            state = _state(last)
            stamp = _dt.datetime.now().strftime("%H:%M:%S")
            echo(f"[{stamp}] {why}: graded in {time.monotonic() - started:.1f} s, verdict {last.verdict}")
            for line in changes(previous, state):
                echo(line)
            sys.stdout.flush()
            previous = state
            if stop_after is not None and gradings >= stop_after:
                break
            now = _wait_for_change(folder, skip, seen)
            edited = changed_files(seen, now)
            shown = ", ".join(_relative(p, folder) for p in edited[:3]) + (" ..." if len(edited) > 3 else "")
            why = f"changed: {shown}"
    except KeyboardInterrupt:
        echo("watch stopped")
    if last is None:
        return 2
    return 0 if last.passed else 1


def _relative(path: str, folder: Path) -> str:
    return os.path.relpath(path, folder)


def _wait_for_change(folder: Path, skip: Path | None, seen: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The files once they differ from ``seen`` and have been still for SETTLE_S."""
    while True:
        time.sleep(POLL_S)
        now = snapshot(folder, skip)
        if now == seen:
            continue
        while True:
            time.sleep(SETTLE_S)
            settled = snapshot(folder, skip)
            if settled == now:
                return now
            now = settled
