"""Checkpoint save/load for exact resume (SPEC §3 checkpointing).

Format: one ``torch.save`` file (zip) holding a dict::

    {"format": "lmspec-checkpoint", "version": 1, "iteration": int,
     "model": model.state_dict(), "optimizer": optimizer.state_dict(),
     "rng": {...} (only with save_rng_state=True),
     "metadata": {...} (only when given: e.g. the run's config)}

Everything in it loads with ``torch.load(weights_only=True)``: tensors,
numbers, strings, lists, tuples and dicts only (metadata is checked for this
when saving, so a checkpoint that cannot be read back is never written).
Writes to a path are atomic: the file is written to a temporary sibling,
flushed to disk, then renamed over the target with ``os.replace``, so a crash
leaves either the old checkpoint or the new one, never half of one.
"""

import contextlib
import io
import os
import random
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

__all__ = [
    "FORMAT_TAG",
    "FORMAT_VERSION",
    "CheckpointError",
    "CheckpointSource",
    "capture_rng_state",
    "load_checkpoint",
    "read_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
]

FORMAT_TAG = "lmspec-checkpoint"
FORMAT_VERSION = 1

# subtle: beartype's protocol for typing.BinaryIO/IO[bytes] rejects io.BytesIO,
# so binary file objects are accepted as io.IOBase (BytesIO, open(..., "rb"/"wb")).
CheckpointSource = str | os.PathLike | io.IOBase | IO[bytes]

_SAFE_SCALARS = str | int | float | bool | None


class CheckpointError(ValueError):
    """A checkpoint that cannot be written or read: truncated, corrupt, not a
    checkpoint of this format, or not matching the model/optimizer."""


def _describe(target: CheckpointSource) -> str:
    if isinstance(target, str | os.PathLike):
        return f"checkpoint {os.fspath(target)!r}"
    name = getattr(target, "name", None)
    return f"checkpoint file object {name!r}" if isinstance(name, str) else "checkpoint file object"


def _check_loadable(value: Any, where: str) -> None:
    """Raise CheckpointError if ``value`` would not load under weights_only=True."""
    if isinstance(value, _SAFE_SCALARS | torch.Tensor):
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_loadable(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, _SAFE_SCALARS):
                raise CheckpointError(f"{where} has a key of type {type(key).__name__}")
            _check_loadable(item, f"{where}[{key!r}]")
        return
    raise CheckpointError(
        f"{where} is a {type(value).__name__}, which torch.load(weights_only=True) cannot "
        "read back; use str, int, float, bool, None, tensors, lists, tuples and dicts"
    )


def capture_rng_state() -> dict[str, Any]:
    """The global RNG states: Python ``random``, NumPy's global RNG, torch CPU
    and (when available) every CUDA device, in a weights_only-safe form."""
    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state` (CUDA states only if CUDA is here)."""
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    np_state = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": np_state["bit_generator"],
            "state": {"key": np_state["key"].numpy().astype(np.uint32), "pos": np_state["pos"]},
            "has_gauss": np_state["has_gauss"],
            "gauss": np_state["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


def save_checkpoint(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    out: CheckpointSource,
    *,
    save_rng_state: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Write model state, optimizer state and ``iteration`` to ``out`` (SPEC §3).

    ``out`` is a path (written atomically, parent directory must exist) or a
    binary file object (written at its current position, not closed).
    ``save_rng_state=True`` also stores the global RNG states for an exact
    resume; ``metadata`` (e.g. the run's config, or a data generator's
    ``bit_generator.state``) is stored as given.

    Raises:
        CheckpointError: metadata that could not be read back, or a negative iteration.
    """
    if iteration < 0:
        raise CheckpointError(f"iteration must be >= 0, got {iteration}")
    payload: dict[str, Any] = {
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
        "iteration": int(iteration),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
    }
    if save_rng_state:
        payload["rng"] = capture_rng_state()
    if metadata is not None:
        metadata = dict(metadata)
        _check_loadable(metadata, "metadata")
        payload["metadata"] = metadata
    if not isinstance(out, str | os.PathLike):
        torch.save(payload, out)
        return
    _save_atomically(payload, Path(out))


def _save_atomically(payload: dict[str, Any], path: Path) -> None:
    """``torch.save`` to a temporary file beside ``path``, synced, then renamed over it:
    a reader sees the old checkpoint or the new one, never half of one."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates the file 0600; give it the permissions open() would have
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    # best effort: make the rename itself durable (not possible on every OS)
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _verify_archive(src: CheckpointSource, where: str) -> None:
    """Check the zip structure and every record's CRC-32 before unpickling.

    subtle: torch.load does not verify the CRCs that torch.save writes, so a
    flipped byte inside tensor data would otherwise load silently as wrong
    weights. Python's zipfile reads each record and checks its CRC.
    """
    start = None
    if not isinstance(src, str | os.PathLike):
        if not (src.seekable() and src.readable()):
            return  # torch.load needs a seekable stream anyway and will say so
        start = src.tell()
    try:
        with zipfile.ZipFile(src) as archive:
            bad_record = archive.testzip()
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"{where} is truncated or corrupt: not a complete torch.save zip archive ({exc})"
        ) from exc
    finally:
        if start is not None:
            src.seek(start)
    if bad_record is not None:
        raise CheckpointError(f"{where} is corrupt: record {bad_record!r} fails its CRC-32 check")


def read_checkpoint(src: CheckpointSource) -> dict[str, Any]:
    """Read and validate a checkpoint without applying it (tensors on CPU).

    Returns the payload dict (keys as in the module docstring), e.g. to read
    ``metadata`` before building the model.

    Raises:
        CheckpointError: missing/unreadable file, truncated or corrupt data, not
            an lmspec checkpoint, or an unsupported format version.
    """
    where = _describe(src)
    if isinstance(src, str | os.PathLike):
        if not os.path.isfile(src):
            raise CheckpointError(f"{where} does not exist or is not a file")
        if os.path.getsize(src) == 0:
            raise CheckpointError(f"{where} is empty (0 bytes): an interrupted write?")
    _verify_archive(src, where)
    try:
        payload = torch.load(src, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"{where} is truncated or corrupt and cannot be read "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc
    if not isinstance(payload, dict):
        raise CheckpointError(f"{where} holds a {type(payload).__name__}, not a checkpoint dict")
    if payload.get("format") != FORMAT_TAG:
        raise CheckpointError(
            f"{where} is not an lmspec checkpoint (format tag {payload.get('format')!r}, expected {FORMAT_TAG!r})"
        )
    if payload.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{where} has format version {payload.get('version')!r}; this code reads version {FORMAT_VERSION}"
        )
    for key, kind in (("iteration", int), ("model", dict), ("optimizer", dict)):
        if not isinstance(payload.get(key), kind):
            raise CheckpointError(f"{where} is missing a valid {key!r} entry")
    return payload


def load_checkpoint(
    src: CheckpointSource,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    restore_rng: bool = False,
) -> int:
    """Restore model and optimizer state from ``src``; return the saved iteration.

    ``restore_rng=True`` also restores the global RNG states (the checkpoint
    must have been saved with ``save_rng_state=True``).

    Raises:
        CheckpointError: as :func:`read_checkpoint`, or a state that does not
            match ``model``/``optimizer`` (missing/unexpected keys, shapes, groups).
    """
    where = _describe(src)
    payload = read_checkpoint(src)
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{where} does not match the model: {exc}") from exc
    try:
        optimizer.load_state_dict(payload["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{where} does not match the optimizer: {exc}") from exc
    if restore_rng:
        if "rng" not in payload:
            raise CheckpointError(f"{where} has no RNG state (saved without save_rng_state=True)")
        restore_rng_state(payload["rng"])
    return payload["iteration"]
