"""run_silu asks for 100 GB."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu allocates 100 GB", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    big = torch.empty(100 * 2**30, dtype=torch.uint8)
    big.fill_(1)
    return in_features
