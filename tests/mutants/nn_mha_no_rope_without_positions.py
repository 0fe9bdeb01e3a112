"""MUTANT: RoPE skipped when token_positions is omitted (instead of defaulting to 0..seq-1).

A STRICT rule (SPEC §2: the handout leaves token_positions=None undefined), so
only the STRICT test test_mha_with_rope_default_positions kills it; every
MUST test passes."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_linear, run_rope, run_scaled_dot_product_attention

MUTANT = {
    "spec": "2.mha",
    "bug": "token_positions=None skips RoPE instead of using 0..seq-1",
    "run": ["2.mha"],
    "strict_only": (
        "the handout leaves token_positions=None undefined: defaulting to 0..seq-1 is a STRICT rule (SPEC §2)"
    ),
    "hinted": ["RoPE not applied"],
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
    if token_positions is not None:  # BUG: no default positions
        pos = token_positions.unsqueeze(-2)
        q, k = run_rope(d_k, theta, max_seq_len, q, pos), run_rope(d_k, theta, max_seq_len, k, pos)
    mask = torch.ones(seq, seq, dtype=torch.bool, device=in_features.device).tril()
    out = run_scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(-2, -3).flatten(-2)
    return run_linear(d_model, d_model, o_proj_weight, out)
