"""MUTANT: RMSNorm adds eps after the square root."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.rmsnorm",
    "bug": "x / (sqrt(mean(x²)) + eps) · g: eps outside the root",
    "run": ["2.rmsnorm"],
    "hinted": ["eps added outside the square root"],
}


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features.float()
    rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True)) + eps
    return (x / rms * weights).to(in_features.dtype)
