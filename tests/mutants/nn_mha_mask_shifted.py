"""MUTANT: causal mask built with the wrong diagonal, tril(ones, diagonal=1):
position i also attends to position i + 1.

On two tokens that mask lets every position see every key, exactly as no mask
at all does, so the shrunk failing input alone would say "not causal"; a cause
is named only when it also reproduces the output on the test's second input
(5 tokens), where only the shifted mask does."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_linear, run_scaled_dot_product_attention

MUTANT = {
    "spec": "2.mha",
    "bug": "causal mask shifted by one: tril(diagonal=1), i also sees i+1",
    "run": ["2.mha"],
    "hinted": ["causal mask shifted by one"],
    "never_hinted": ["not causal"],
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
        return y.unflatten(-1, (num_heads, d_k)).transpose(-2, -3)  # (..., h, seq, d_k)

    q, k, v = heads(q_proj_weight), heads(k_proj_weight), heads(v_proj_weight)
    mask = torch.ones(seq, seq, dtype=torch.bool, device=in_features.device).tril(1)  # BUG: diagonal=1
    out = run_scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(-2, -3).flatten(-2)
    return run_linear(d_model, d_model, o_proj_weight, out)
