"""MUTANT: SwiGLU gates with SiLU(W3 x) ⊙ W1 x (w1 and w3 swapped)."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.swiglu",
    "bug": "SiLU applied to W3 x instead of W1 x (w1/w3 swapped)",
    "run": ["2.swiglu"],
    "hinted": ["w1 and w3 swapped"],
}


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    a = in_features @ w3_weight.T
    return (a * torch.sigmoid(a) * (in_features @ w1_weight.T)) @ w2_weight.T
