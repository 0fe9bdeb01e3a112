"""MUTANT: scaled dot-product attention that always applies its mask, so the
adapter's default ``mask=None`` crashes (``~None``)."""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.sdpa",
    "bug": "mask=None not handled: ~mask raises TypeError",
    "run": ["2.sdpa"],
    "hinted": ["mask=None not handled"],
}


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))  # BUG: mask may be None
    return torch.softmax(scores, dim=-1) @ V
