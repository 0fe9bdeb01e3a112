"""MUTANT: attention multiplies the scores by sqrt(d_k) instead of dividing."""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.sdpa",
    "bug": "scores · sqrt(d_k) instead of / sqrt(d_k)",
    "run": ["2.sdpa"],
    "hinted": ["scores multiplied by sqrt(d_k) instead of divided"],
    "never_hinted": ["missing 1/sqrt(d_k)", "scaled by 1/d_k", "explained by"],
}


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) * math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ V
