"""MUTANT: heads take interleaved rows of W_Q/W_K/W_V (h, h+H, ...) instead of contiguous blocks."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_linear, run_scaled_dot_product_attention

MUTANT = {
    "spec": "2.mha",
    "bug": "heads interleaved: split (d_k, h) instead of (h, d_k)",
    "run": ["2.mha"],
    "hinted": ["heads interleaved"],
}


def run_multihead_self_attention(
    d_model,
    num_heads,
    q_proj_weight,
    k_proj_weight,
    v_proj_weight,
    o_proj_weight,
    in_features,
):
    seq = in_features.shape[-2]
    d_k = d_model // num_heads

    def heads(w):
        y = run_linear(d_model, d_model, w, in_features)
        return y.unflatten(-1, (d_k, num_heads)).movedim(-1, -3)  # BUG: (d_k, h) split

    q, k, v = heads(q_proj_weight), heads(k_proj_weight), heads(v_proj_weight)
    mask = torch.ones(seq, seq, dtype=torch.bool, device=in_features.device).tril()
    out = run_scaled_dot_product_attention(q, k, v, mask)
    out = out.movedim(-3, -1).flatten(-2)
    return run_linear(d_model, d_model, o_proj_weight, out)
