"""MUTANT: get_batch converts the whole array to an int64 tensor on every call."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.get_batch",
    "bug": "torch.tensor(x, dtype=long) copies the whole memmap (4x its size) for one batch",
    "run": ["3.get_batch"],
    "hinted": ["the whole array was copied or converted"],
}


def run_get_batch(dataset, batch_size, context_length, device):
    data = torch.tensor(dataset, dtype=torch.long)  # BUG: loads everything
    starts = torch.randint(0, len(data) - context_length, (batch_size,))
    index = starts[:, None] + torch.arange(context_length + 1)[None, :]
    windows = data[index].to(device)
    return windows[:, :-1], windows[:, 1:]
