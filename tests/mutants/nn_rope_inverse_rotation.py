"""MUTANT: RoPE rotates by −θ (the rotation matrix transposed: sin signs flipped)."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.rope",
    "bug": "x'_2k = x_2k cos + x_2k+1 sin (rotation by −θ)",
    "run": ["2.rope"],
    "hinted": ["rotates by −θ"],
}


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    x = in_query_or_key
    k = torch.arange(d_k // 2, device=x.device, dtype=torch.float32)
    angle = token_positions[..., None].float() * theta ** (-2 * k / d_k)
    cos, sin = angle.cos(), angle.sin()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos + x1 * sin, -x0 * sin + x1 * cos], dim=-1).flatten(-2)
