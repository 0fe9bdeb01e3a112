"""A submission as bytes: the deterministic tar.gz a batch sends to its
workers (``pack``) and its safe unpacking there (``unpack``). The same
content gives the same bytes, hence the same hash: a batch reuses the
results of a submission that did not change."""

import gzip
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "SKIPPED_DIRS", "Packed", "pack", "unpack"]

#: Folders that never travel: version control objects (``.git`` travels as an
#: empty folder: it marks the repository's root), environments, caches.
SKIPPED_DIRS = frozenset(
    {
        "__pycache__",
        ".venv",
        "venv",
        ".nox",
        ".tox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        "node_modules",
        ".ipynb_checkpoints",
    }
)
MAX_FILE_BYTES = 50_000_000  # datasets and checkpoints students commit: the grader never needs them


@dataclass(frozen=True)
class Packed:
    archive: bytes
    sha256: str
    files: int
    skipped: tuple[str, ...] = ()


def _add(tar: tarfile.TarFile, name: str, data: bytes | None, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if data is None:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
    else:
        info.size = len(data)
        info.mode = mode
        tar.addfile(info, io.BytesIO(data))


def pack(path: Path, *, single_name: str = "adapters.py") -> Packed:
    """A deterministic tar.gz of a submission folder (sorted, no times, no
    owners: the same content gives the same bytes, hence the same hash), or
    of a single adapters file (as ``single_name``)."""
    buf = io.BytesIO()
    skipped: list[str] = []
    count = 0
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=6) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        if path.is_file():
            _add(tar, single_name, path.read_bytes())
            count = 1
        else:
            for root, dirs, names in os.walk(path):
                rel_root = Path(root).relative_to(path)
                keep = []
                for d in sorted(dirs):
                    full = Path(root) / d
                    if d == ".git":
                        _add(tar, str(rel_root / d), None)  # the root marker, without its objects
                    elif d in SKIPPED_DIRS or full.is_symlink():
                        skipped.append(f"{rel_root / d}/")
                    else:
                        keep.append(d)
                dirs[:] = keep
                for n in sorted(names):
                    full = Path(root) / n
                    rel = str(rel_root / n)
                    if full.is_symlink() or not full.is_file() or n.endswith((".pyc", ".pyo")):
                        skipped.append(rel)
                    elif full.stat().st_size > MAX_FILE_BYTES:
                        skipped.append(f"{rel} ({full.stat().st_size / 1e6:.0f} MB)")
                    else:
                        _add(tar, rel, full.read_bytes(), 0o755 if os.access(full, os.X_OK) else 0o644)
                        count += 1
    data = buf.getvalue()
    return Packed(data, hashlib.sha256(data).hexdigest(), count, tuple(skipped))


def unpack(archive: bytes, dest: Path) -> None:
    """Unpack an archive made by pack() (tarfile's "data" filter: no links
    out, no devices, no absolute paths)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
