"""MUTANT: get_batch returns the dataset's dtype (int32, uint16) instead of int64."""

import numpy as np
import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.get_batch",
    "bug": "tensors keep the array's dtype (torch.from_numpy without .long())",
    "run": ["3.get_batch"],
    "hinted": ["the array's dtype kept"],
}


def run_get_batch(dataset, batch_size, context_length, device):
    starts = np.random.randint(0, len(dataset) - context_length, size=batch_size)
    x = np.stack([dataset[s : s + context_length] for s in starts])  # BUG: no int64
    y = np.stack([dataset[s + 1 : s + context_length + 1] for s in starts])
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
