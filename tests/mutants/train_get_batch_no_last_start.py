"""MUTANT: get_batch never draws the last valid start (exclusive bound off by one)."""

import numpy as np
import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.get_batch",
    "bug": "starts drawn from 0..len(x)-m-2: randint's exclusive high given len(x)-m-1",
    "run": ["3.get_batch"],
    "hinted": ["is never drawn (an exclusive upper bound one too low)"],
}


def run_get_batch(dataset, batch_size, context_length, device):
    starts = np.random.randint(0, len(dataset) - context_length - 1, size=batch_size)  # BUG
    x = np.stack([dataset[s : s + context_length] for s in starts]).astype(np.int64)
    y = np.stack([dataset[s + 1 : s + context_length + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
