"""Guards on the suite's own files: the golden snapshots (``snapshots/MANIFEST``,
checked before and after every grading) and the code the judge imports
(digested before and after a grading without the sandbox, where a change
means the submission wrote into the suite and the run is compromised; under
bubblewrap the submission cannot see these files)."""

import os
from pathlib import Path

from lmspec import ROOT
from lmspec.conformance.fixtures import sha256_file

REPO = ROOT
SNAPSHOTS = ROOT / "snapshots"
# Everything the judge reads from the suite: snapshots, the tests and their
# helpers, the judge and its worker, the grader.
WATCHED = (SNAPSHOTS, ROOT / "conformance", ROOT / "tools" / "grade")
_MAX_FILES = 20_000


def tree_digest(roots: tuple[Path, ...] = WATCHED) -> dict[str, str]:
    """``{path relative to the repo: sha256}`` of every file under ``roots``
    (bytecode caches left out: the children run with PYTHONDONTWRITEBYTECODE,
    and other tools write them legitimately)."""
    out: dict[str, str] = {}
    for root in roots:
        if root.is_file():
            paths = [root]
        elif root.is_dir():
            paths = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        else:
            paths = []
        for p in paths[:_MAX_FILES]:
            try:
                out[_rel(p)] = sha256_file(p)
            except OSError as exc:
                out[_rel(p)] = f"unreadable: {exc}"
    return out


def _rel(p: Path) -> str:
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return str(p)


def diff_digests(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Human-readable changes between two digests (modified, added, removed)."""
    changes = []
    for path in sorted(before.keys() | after.keys()):
        if path not in after:
            changes.append(f"{path} removed")
        elif path not in before:
            changes.append(f"{path} added")
        elif before[path] != after[path]:
            changes.append(f"{path} modified")
    return changes


def verify_manifest(snapshot_dir: Path = SNAPSHOTS) -> list[str] | None:
    """Check ``snapshots/MANIFEST`` (lines ``sha256  relative/path  ...``).

    Returns None when there is no MANIFEST (nothing to verify), else the list
    of problems (empty when every listed file matches). Paths are relative to
    the snapshots folder; a path that is not found there is tried relative to
    the repository root.
    """
    manifest = snapshot_dir / "MANIFEST"
    if not manifest.is_file():
        return None
    problems = []
    for n, line in enumerate(manifest.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 2 or len(parts[0]) != 64:
            problems.append(f"MANIFEST line {n} not understood: {line[:80]!r}")
            continue
        digest, rel = parts[0].lower(), parts[1]
        path = snapshot_dir / rel
        if not path.is_file() and (snapshot_dir.parent / rel).is_file():
            path = snapshot_dir.parent / rel
        if not path.is_file():
            problems.append(f"{rel} listed in MANIFEST is missing")
        elif sha256_file(path) != digest:
            problems.append(f"{rel} does not match its MANIFEST sha256")
    return problems


def inside(folder: Path, path: Path) -> Path:
    """``path`` when it lies in ``folder`` (as written and with links resolved); else a RuntimeError."""
    norm, base = Path(os.path.normpath(path)), Path(os.path.normpath(folder))
    if norm == base or not norm.is_relative_to(base):
        raise RuntimeError(f"refusing to write {path}: not inside {folder}")
    if os.path.lexists(norm) and not Path(os.path.realpath(norm)).is_relative_to(os.path.realpath(base)):
        raise RuntimeError(f"refusing to write {path}: it leads out of {folder}")
    return norm
