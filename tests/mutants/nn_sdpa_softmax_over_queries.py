"""MUTANT: attention normalises the scores over the queries (dim −2), not the keys."""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.sdpa",
    "bug": "softmax(scores, dim=-2): each key's weights sum to 1 over the queries",
    "run": ["2.sdpa"],
    "hinted": ["softmax over the queries (dim −2) instead of the keys (dim −1)"],
    "never_hinted": ["mask inverted", "mask ignored", "missing 1/sqrt(d_k)", "explained by"],
}


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-2) @ V
