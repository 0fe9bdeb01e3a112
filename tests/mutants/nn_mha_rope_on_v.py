"""MUTANT: RoPE applied to V as well as Q and K."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_linear, run_rope, run_scaled_dot_product_attention

MUTANT = {"spec": "2.mha", "bug": "RoPE also applied to V", "run": ["2.mha"], "hinted": ["RoPE also applied to V"]}


def run_multihead_self_attention_with_rope(
    d_model,
    num_heads,
    max_seq_len,
    theta,
    q_proj_weight,
    k_proj_weight,
    v_proj_weight,
    o_proj_weight,
    in_features,
    token_positions=None,
):
    seq = in_features.shape[-2]
    d_k = d_model // num_heads

    def heads(w):
        y = run_linear(d_model, d_model, w, in_features)
        return y.unflatten(-1, (num_heads, d_k)).transpose(-2, -3)  # (..., h, seq, d_k)

    q, k, v = heads(q_proj_weight), heads(k_proj_weight), heads(v_proj_weight)
    if token_positions is None:
        token_positions = torch.arange(seq, device=in_features.device)
    pos = token_positions.unsqueeze(-2)  # broadcast over heads
    q, k = run_rope(d_k, theta, max_seq_len, q, pos), run_rope(d_k, theta, max_seq_len, k, pos)
    v = run_rope(d_k, theta, max_seq_len, v, pos)  # BUG: V rotated too
    mask = torch.ones(seq, seq, dtype=torch.bool, device=in_features.device).tril()
    out = run_scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(-2, -3).flatten(-2)
    return run_linear(d_model, d_model, o_proj_weight, out)
