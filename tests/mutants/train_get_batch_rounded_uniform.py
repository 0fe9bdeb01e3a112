"""MUTANT: get_batch rounds a scaled uniform float: the first and last start get half weight."""

import numpy as np
import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.get_batch",
    "bug": ("starts = round(U(0,1) * (n_starts - 1)): every start reachable, endpoints half as likely"),
    "run": ["3.get_batch"],
    "hinted": ["the first and last start are half as likely"],
}


def run_get_batch(dataset, batch_size, context_length, device):
    n_starts = len(dataset) - context_length
    starts = np.rint(np.random.rand(batch_size) * (n_starts - 1)).astype(np.int64)  # BUG
    index = starts[:, None] + np.arange(context_length + 1)[None, :]
    windows = torch.from_numpy(np.asarray(dataset[index], dtype=np.int64)).to(device)
    return windows[:, :-1], windows[:, 1:]
