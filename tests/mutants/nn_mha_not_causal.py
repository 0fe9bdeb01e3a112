"""MUTANT: no causal mask: every position attends to the future."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_linear, run_scaled_dot_product_attention

MUTANT = {
    "spec": "2.mha",
    "bug": "causal mask missing",
    "run": ["2.mha"],
    "hinted": ["not causal"],
    "never_hinted": ["shifted by one", "explained by"],
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
    d_k = d_model // num_heads

    def heads(w):
        y = run_linear(d_model, d_model, w, in_features)
        return y.unflatten(-1, (num_heads, d_k)).transpose(-2, -3)  # (..., h, seq, d_k)

    q, k, v = heads(q_proj_weight), heads(k_proj_weight), heads(v_proj_weight)
    mask = None  # BUG: no causal mask
    out = run_scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(-2, -3).flatten(-2)
    return run_linear(d_model, d_model, o_proj_weight, out)
