"""MUTANT: each residual adds the normalised input: z = RMSNorm₁(x) + MHA(RMSNorm₁(x))."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_multihead_self_attention_with_rope, run_rmsnorm, run_swiglu

MUTANT = {
    "spec": "2.block",
    "bug": "h = RMSNorm(x); x = h + sublayer(h), for both sublayers",
    "run": ["2.block"],
    "hinted": ["each residual adds the normalised input"],
    "never_hinted": ["post-norm", "missing residual", "explained by"],
}


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    attn = [weights[f"attn.{p}_proj.weight"] for p in ("q", "k", "v", "output")]
    ffn = [weights[f"ffn.{w}.weight"] for w in ("w1", "w2", "w3")]
    h = run_rmsnorm(d_model, 1e-5, weights["ln1.weight"], in_features)
    z = h + run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, *attn, h)
    h = run_rmsnorm(d_model, 1e-5, weights["ln2.weight"], z)
    return h + run_swiglu(d_model, d_ff, *ffn, h)
