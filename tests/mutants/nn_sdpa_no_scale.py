"""MUTANT: attention scores Q Kᵀ without the 1/sqrt(d_k) scaling."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.sdpa",
    "bug": "missing 1/sqrt(d_k)",
    "run": ["2.sdpa"],
    "hinted": ["missing 1/sqrt(d_k)"],
    "never_hinted": ["explained by"],
}


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
