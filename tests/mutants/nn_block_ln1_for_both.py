"""MUTANT: the block normalises both sublayers' inputs with ln1's gain (ln2.weight never read)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_multihead_self_attention_with_rope, run_rmsnorm, run_swiglu

MUTANT = {
    "spec": "2.block",
    "bug": "RMSNorm₂ built from ln1.weight",
    "run": ["2.block"],
    "hinted": ["ln1's gain used for both RMSNorms"],
    "never_hinted": ["no RMSNorm applied", "post-norm", "explained by"],
}


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    attn = [weights[f"attn.{p}_proj.weight"] for p in ("q", "k", "v", "output")]
    ffn = [weights[f"ffn.{w}.weight"] for w in ("w1", "w2", "w3")]
    x = in_features
    z = x + run_multihead_self_attention_with_rope(
        d_model, num_heads, max_seq_len, theta, *attn, run_rmsnorm(d_model, 1e-5, weights["ln1.weight"], x)
    )
    return z + run_swiglu(d_model, d_ff, *ffn, run_rmsnorm(d_model, 1e-5, weights["ln1.weight"], z))
