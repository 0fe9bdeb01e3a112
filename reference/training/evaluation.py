"""Token arrays on disk and the validation loss (SPEC §3 training loop): what
the loop reads and how it measures itself."""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from lmspec.reference.training.loss import cross_entropy

__all__ = ["TokenArray", "autocast", "evaluate", "open_tokens"]

TokenArray = npt.NDArray[np.integer]

_SCAN_CHUNK = 1 << 24  # tokens per chunk when scanning a memmap for its largest id


def open_tokens(path: str | os.PathLike, vocab_size: int, *, name: str = "data") -> TokenArray:
    """Memory-map a 1-D token array: ``.npy`` via ``np.load(mmap_mode="r")``, any
    other file as raw ``uint16`` (``uint32`` when ``vocab_size > 65,536``).

    The whole array is scanned once, in chunks, for its largest id, so a data
    file that does not match the model's vocabulary fails here with a clear
    message instead of deep inside the embedding.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not 1-D integers, fewer than 2 tokens, or an id >= vocab_size.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{name} file {str(p)!r} does not exist")
    try:
        if p.suffix == ".npy":
            tokens = np.load(p, mmap_mode="r")
        else:
            tokens = np.memmap(p, dtype=np.uint16 if vocab_size <= 65_536 else np.uint32, mode="r")
    except (ValueError, OSError) as exc:
        raise ValueError(f"cannot memory-map {name} {str(p)!r}: {exc}") from exc
    if tokens.ndim != 1 or tokens.dtype.kind not in "ui":
        raise ValueError(
            f"{name} {str(p)!r} must be a 1-D integer array, got shape {tokens.shape} and dtype {tokens.dtype}"
        )
    if len(tokens) < 2:
        raise ValueError(f"{name} {str(p)!r} holds {len(tokens)} token(s); at least 2 are needed")
    low, high = _id_range(tokens)
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"{name} {str(p)!r} contains token id {bad}, outside the model's vocabulary "
            f"[0, {vocab_size}): was it encoded with a different tokenizer?"
        )
    return tokens


def _id_range(tokens: TokenArray) -> tuple[int, int]:
    low, high = 0, 0
    for i in range(0, len(tokens), _SCAN_CHUNK):
        chunk = tokens[i : i + _SCAN_CHUNK]
        low, high = min(low, int(chunk.min())), max(high, int(chunk.max()))
    return low, high


@torch.inference_mode()
def evaluate(
    model: torch.nn.Module,
    tokens: TokenArray,
    context_length: int,
    batch_size: int,
    max_batches: int,
    device: torch.device,
    dtype: torch.dtype = torch.float32,
) -> float:
    """Mean cross-entropy over fixed, non-overlapping windows of ``tokens``.

    Up to ``max_batches · batch_size`` windows of ``context_length`` tokens,
    spread evenly over the array (all of them when it is short), so every
    evaluation of a run sees the same tokens and consumes no randomness.
    """
    n_windows = (len(tokens) - 1) // context_length
    if n_windows < 1:
        raise ValueError(
            f"validation data has {len(tokens)} tokens; context_length {context_length} "
            f"needs at least {context_length + 1}"
        )
    take = min(n_windows, max_batches * batch_size)
    starts = (np.arange(take, dtype=np.int64) * n_windows // take) * context_length
    offsets = np.arange(context_length + 1, dtype=np.int64)
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, take, batch_size):
        index = starts[i : i + batch_size, None] + offsets[None, :]
        windows = torch.from_numpy(np.asarray(tokens[index], dtype=np.int64)).to(device)
        with autocast(device, dtype):
            logits = model(windows[:, :-1])
        total += float(cross_entropy(logits, windows[:, 1:])) * windows.shape[0]
    model.train(was_training)
    return total / take


@contextlib.contextmanager
def autocast(device: torch.device, dtype: torch.dtype) -> Iterator[None]:
    if dtype == torch.float32:
        yield
    else:
        with torch.autocast(device_type=device.type, dtype=dtype):
            yield
