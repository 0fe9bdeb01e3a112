"""MUTANT (encdec): head slopes 2^(-8(k-1)/h), k from 0."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_alibi_bias(num_heads, seq_len):
    slopes = torch.tensor([2.0 ** (-8.0 * k / num_heads) for k in range(num_heads)])
    pos = torch.arange(seq_len, dtype=torch.float32)
    bias = -slopes.view(-1, 1, 1) * (pos.view(-1, 1) - pos)
    return bias.masked_fill(pos.view(1, -1) > pos.view(-1, 1), float("-inf"))


MUTANT = {
    "spec": "encdec.alibi",
    "bug": "head slopes 2^(-8(k-1)/h), k from 0",
    "run": ["encdec.alibi"],
    "profile": "encdec",
    "hinted": ["slopes 2^(−8(k−1)/h)"],
}
