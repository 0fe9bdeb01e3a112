"""VARIANT: MHA with RoPE that requires token_positions and says so: the
handout leaves ``token_positions=None`` undefined, and this student raises a
clear ValueError for it instead of guessing 0..seq-1. Every MUST test passes
(they always give positions: (1, seq) like the official test, or
(batch, seq)); the STRICT default-positions test fails, as it should. Q, K, V
come from one fused (3·d_model, d_model) projection, (batch, seq) positions get
a head axis before RoPE. Everything else comes from the reference adapter.
"""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_rope, run_scaled_dot_product_attention

VARIANT = {"what": "MHA with RoPE raising ValueError on token_positions=None", "run": ["2.mha"]}


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
    if token_positions is None:
        raise ValueError("token_positions is required: pass the position of every token, shape (..., seq)")
    d_k = d_model // num_heads
    seq = in_features.shape[-2]
    qkv = in_features @ torch.cat([q_proj_weight, k_proj_weight, v_proj_weight]).T  # (..., seq, 3·d_model)
    q, k, v = (t.unflatten(-1, (num_heads, d_k)).transpose(-2, -3) for t in qkv.chunk(3, dim=-1))
    positions = token_positions.unsqueeze(-2)  # (..., 1, seq): the same rotation for every head
    q = run_rope(d_k, theta, max_seq_len, q, positions)
    k = run_rope(d_k, theta, max_seq_len, k, positions)
    causal = torch.ones(seq, seq, dtype=torch.bool, device=in_features.device).tril()
    heads = run_scaled_dot_product_attention(q, k, v, causal)
    return heads.transpose(-2, -3).flatten(-2) @ o_proj_weight.T
