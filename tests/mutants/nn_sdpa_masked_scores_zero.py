"""MUTANT: masking by multiplying the scores by the mask, so masked scores are
0 instead of −inf and masked keys keep a non-zero weight."""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.sdpa",
    "bug": "masked scores set to 0 (scores * mask) instead of −inf",
    "run": ["2.sdpa"],
    "hinted": ["masked scores set to 0"],
}


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores * mask
    return torch.softmax(scores, dim=-1) @ V
