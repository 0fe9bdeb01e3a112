"""MUTANT: MHA with RoPE hands (batch, seq) token_positions to RoPE unchanged,
so they broadcast against Q, K of shape (batch, heads, seq, d_k) with the
batch axis lined up against the head axis: a shape error when batch differs
from heads (and from 1), silently wrong positions when batch = heads. The
(1, seq) positions of the official test work, which is why it slips through."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_linear, run_rope, run_scaled_dot_product_attention

MUTANT = {
    "spec": "2.mha",
    "bug": "(batch, seq) token_positions not broadcast over the head axis (no positions[:, None, :])",
    "run": ["2.mha"],
    "hinted": ["not broadcast over the head axis"],
}


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
    pos = torch.arange(seq, device=in_features.device) if token_positions is None else token_positions
    q, k = run_rope(d_k, theta, max_seq_len, q, pos), run_rope(d_k, theta, max_seq_len, k, pos)  # BUG
    mask = torch.ones(seq, seq, dtype=torch.bool, device=in_features.device).tril()
    out = run_scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(-2, -3).flatten(-2)
    return run_linear(d_model, d_model, o_proj_weight, out)
