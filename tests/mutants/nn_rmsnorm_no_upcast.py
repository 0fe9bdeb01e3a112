"""MUTANT: RMSNorm computes in the input dtype (no float32 upcast): right in
float32, visibly off in bfloat16."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.rmsnorm",
    "bug": "no float32 upcast: bfloat16 input computed in bfloat16",
    "run": ["2.rmsnorm"],
    "hinted": ["without the float32 upcast"],
}


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features
    rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x / rms * weights.to(x.dtype)
