"""MUTANT: RMSNorm upcasts to float32 and computes correctly, but never casts
the result back: bfloat16 in, float32 out (the handout ends with
``return result.to(in_dtype)``)."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.rmsnorm",
    "bug": "result returned in float32 for a bfloat16 input (no .to(in_dtype))",
    "run": ["2.rmsnorm"],
    "hinted": ["returned in float32: cast the result back"],
}


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features.to(torch.float32)
    rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x / rms * weights  # BUG: stays float32
