"""MUTANT (encdec): attention scores without 1/sqrt(d_k)."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return torch.softmax(scores, dim=-1) @ V


MUTANT = {
    "spec": "encdec.attention",
    "bug": "attention scores without 1/sqrt(d_k)",
    "run": ["encdec.attention"],
    "profile": "encdec",
    "hinted": ["missing 1/sqrt(d_k) scaling"],
}
