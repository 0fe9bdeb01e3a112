"""MUTANT: the LM head reads the token embeddings (weights tied; lm_head.weight never read)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_transformer_lm as _run_transformer_lm

MUTANT = {
    "spec": "2.lm",
    "bug": "logits = h Eᵀ with E the token embeddings",
    "run": ["2.lm"],
    "hinted": ["LM head tied to the token embeddings"],
    "never_hinted": ["final RMSNorm missing", "explained by"],
}


def run_transformer_lm(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights, in_indices
):
    tied = {**weights, "lm_head.weight": weights["token_embeddings.weight"]}
    return _run_transformer_lm(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, tied, in_indices
    )
