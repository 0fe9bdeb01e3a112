"""MUTANT: the LM skips the final RMSNorm before the LM head."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_embedding, run_linear, run_transformer_block

MUTANT = {
    "spec": "2.lm",
    "bug": "final RMSNorm (ln_final) missing",
    "run": ["2.lm"],
    "hinted": ["final RMSNorm missing"],
    "never_hinted": ["explained by"],
}


def run_transformer_lm(
    vocab_size,
    context_length,
    d_model,
    num_layers,
    num_heads,
    d_ff,
    rope_theta,
    weights,
    in_indices,
):
    h = run_embedding(vocab_size, d_model, weights["token_embeddings.weight"], in_indices)
    for i in range(num_layers):
        prefix = f"layers.{i}."
        layer = {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}
        h = run_transformer_block(d_model, num_heads, d_ff, context_length, rope_theta, layer, h)
    return run_linear(d_model, vocab_size, weights["lm_head.weight"], h)
