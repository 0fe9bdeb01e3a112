"""Random training batches from a 1-D token array (SPEC §3 get_batch)."""

import numpy as np
import numpy.typing as npt
import torch
from jaxtyping import Int
from torch import Tensor

__all__ = ["InvalidDeviceError", "get_batch", "resolve_device"]


class InvalidDeviceError(RuntimeError, ValueError):
    """A device string that torch cannot parse, or a device that is not available.

    A RuntimeError (what torch raises for such devices, and what the CS336 tests
    expect) and a ValueError (it is a bad argument), so either ``except`` works.
    """


def resolve_device(device: str | torch.device) -> torch.device:
    """Parse ``device`` and check that it is usable here, before any work is done.

    Raises:
        InvalidDeviceError: unparsable, or a cuda/mps/other device not available
            (for cuda: no CUDA, or an index beyond the visible device count).
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise InvalidDeviceError(f"invalid device {device!r}: {exc}") from exc
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidDeviceError(
                f"device {device!r} requested but CUDA is not available "
                "(torch not compiled with CUDA enabled, or no GPU visible)"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise InvalidDeviceError(f"device {device!r} requested but only {count} CUDA device(s) are visible")
        return dev
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise InvalidDeviceError(f"device {device!r} requested but MPS is not available")
    try:  # any other backend: the cheapest real check is to allocate on it
        torch.empty(0, device=dev)
    except Exception as exc:
        raise InvalidDeviceError(f"device {device!r} is not usable: {exc}") from exc
    return dev


def get_batch(
    x: npt.NDArray[np.integer],
    batch_size: int,
    context_length: int,
    device: str | torch.device,
    *,
    generator: np.random.Generator | None = None,
) -> tuple[Int[Tensor, "batch_size context_length"], Int[Tensor, "batch_size context_length"]]:
    """Sample ``batch_size`` windows of ``x``: inputs ``x[s:s+m]``, targets ``x[s+1:s+m+1]``.

    Start indices ``s`` are uniform over every valid start ``0 .. len(x) − m − 1``
    (``m = context_length``), drawn from ``generator`` or, when None, from
    NumPy's global RNG (so ``np.random.seed`` and a checkpoint's saved RNG state
    control it). Only the ``batch_size·(m+1)`` sampled elements are read, with
    one fancy-indexing gather, so an ``np.memmap`` is never loaded whole.
    Both tensors are int64, contiguous, on ``device``.

    Raises:
        InvalidDeviceError: ``device`` unparsable or unavailable (checked first).
        ValueError: ``x`` not 1-D, non-positive sizes, or ``len(x) < m + 1``.
    """
    dev = resolve_device(device)
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D token array, got shape {x.shape}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if context_length < 1:
        raise ValueError(f"context_length must be >= 1, got {context_length}")
    n_starts = len(x) - context_length
    if n_starts < 1:
        raise ValueError(
            f"dataset too short: len(x) = {len(x)} but context_length = {context_length} "
            f"needs at least {context_length + 1} tokens"
        )
    if generator is None:
        starts = np.random.randint(0, n_starts, size=batch_size, dtype=np.int64)
    else:
        starts = generator.integers(0, n_starts, size=batch_size, dtype=np.int64)
    index = starts[:, None] + np.arange(context_length + 1, dtype=np.int64)[None, :]
    windows = torch.from_numpy(np.asarray(x[index], dtype=np.int64))
    windows = windows.pin_memory().to(dev, non_blocking=True) if dev.type == "cuda" else windows.to(dev)
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()
