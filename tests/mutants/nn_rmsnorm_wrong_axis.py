"""MUTANT: RMSNorm takes the mean of squares over the first axis."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.rmsnorm",
    "bug": "mean of squares over dim 0 instead of the last dim",
    "run": ["2.rmsnorm"],
    "hinted": ["wrong axis (first)"],
}


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features.float()
    inv = torch.rsqrt(x.pow(2).mean(dim=0, keepdim=True) + eps)
    return (x * inv * weights).to(in_features.dtype)
