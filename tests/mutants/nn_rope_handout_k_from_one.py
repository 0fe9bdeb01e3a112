"""MUTANT: RoPE numbers the pairs k = 1..d_k/2, as the handout does, but keeps
the exponent 2k/d_k where the handout's k needs (2k − 2)/d_k: every pair turns
at the next pair's frequency. With one pair (d_k = 2) at position 1 it turns by
1/theta = 1e-4 rad, which the tolerance cannot tell from not turning at all:
there, alone, it looks like "token_positions ignored"."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.rope",
    "bug": "angle i / theta^(2k/d_k) with k = 1..d_k/2 (the handout's k without its −2)",
    "run": ["2.rope"],
    "hinted": ["k = 1..d_k/2"],
    "never_hinted": ["token_positions ignored"],
}


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    x = in_query_or_key
    k = torch.arange(1, d_k // 2 + 1, device=x.device, dtype=torch.float32)
    angle = token_positions[..., None].float() * theta ** (-2 * k / d_k)
    cos, sin = angle.cos(), angle.sin()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
