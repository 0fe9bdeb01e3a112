"""Sampling training batches from a (memory-mapped) array of token ids."""

import numpy as np
import numpy.typing as npt
import torch


def get_batch(
    dataset: npt.NDArray, batch_size: int, context_length: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    # valid starts are 0 .. len - context_length - 1 (we need one extra token for the targets)
    starts = np.random.randint(0, len(dataset) - context_length, size=batch_size)
    # slice row by row so a np.memmap is never read in full
    x = np.stack([np.asarray(dataset[s : s + context_length], dtype=np.int64) for s in starts])
    y = np.stack([np.asarray(dataset[s + 1 : s + 1 + context_length], dtype=np.int64) for s in starts])
    inputs = torch.tensor(x, dtype=torch.long, device=device)
    targets = torch.tensor(y, dtype=torch.long, device=device)
    return inputs, targets


def load_tokens(path: str, dtype=np.uint16) -> np.memmap:
    return np.memmap(path, dtype=dtype, mode="r")
