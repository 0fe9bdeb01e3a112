"""MUTANT (encdec): masked scores set to 0 instead of a large negative value."""

import math

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores * mask
    return torch.softmax(scores, dim=-1) @ V


MUTANT = {
    "spec": "encdec.attention",
    "bug": "masked scores set to 0 instead of a large negative value",
    "run": ["encdec.attention"],
    "profile": "encdec",
    "hinted": ["masked scores set to 0"],
}
