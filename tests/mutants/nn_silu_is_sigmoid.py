"""MUTANT: SiLU returns sigmoid(x), forgetting the factor x."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.silu",
    "bug": "SiLU = sigmoid(x) (missing the factor x)",
    "run": ["2.silu"],
    "hinted": ["missing the factor x"],
}


def run_silu(in_features):
    return torch.sigmoid(in_features)
