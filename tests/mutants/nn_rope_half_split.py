"""MUTANT: RoPE rotates the pairs (x_k, x_{k+d/2}) (rotate-half, GPT-NeoX
style) instead of adjacent pairs (x_{2k}, x_{2k+1})."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.rope",
    "bug": "half-split rotation (x_k, x_{k+d/2}) instead of adjacent pairs",
    "run": ["2.rope"],
    "hinted": ["half-split rotation"],
}


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    x = in_query_or_key
    k = torch.arange(d_k // 2, device=x.device, dtype=torch.float32)
    angle = token_positions[..., None].float() * theta ** (-2 * k / d_k)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., : d_k // 2], x[..., d_k // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
