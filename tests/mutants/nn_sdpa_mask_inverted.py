"""MUTANT: boolean mask read as True = masked out."""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.sdpa",
    "bug": "mask inverted (True treated as 'masked out')",
    "run": ["2.sdpa"],
    "hinted": ["mask inverted"],
}


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
