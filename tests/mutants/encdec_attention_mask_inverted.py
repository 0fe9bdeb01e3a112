"""MUTANT (encdec): attention fills the allowed scores (mask polarity inverted)."""

import math

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)
    return torch.softmax(scores, dim=-1) @ V


MUTANT = {
    "spec": "encdec.attention",
    "bug": "attention fills the allowed scores (mask polarity inverted)",
    "run": ["encdec.attention"],
    "profile": "encdec",
    "hinted": ["mask polarity inverted"],
}
