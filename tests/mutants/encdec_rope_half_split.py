"""MUTANT (encdec): RoPE rotates the pairs (x_k, x_{k+d/2}) (rotate-half) instead of the adjacent (x_2k, x_2k+1)."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_rotary_embedding(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    x = in_query_or_key
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angle = (token_positions.to(torch.float64)[..., None] * inv_freq).to(x.dtype)
    cos, sin = angle.cos(), angle.sin()
    first, second = x[..., : d_k // 2], x[..., d_k // 2 :]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


MUTANT = {
    "spec": "encdec.rope",
    "bug": "RoPE pairs (x_k, x_k+d/2) (rotate-half) instead of (x_2k, x_2k+1)",
    "run": ["encdec.rope"],
    "profile": "encdec",
    "hinted": ["rotate-half"],
}
