"""MUTANT: the post-norm LM ablation also drops ln_final (the spec keeps it)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_embedding, run_linear, run_rmsnorm, run_transformer_block_ablation

MUTANT = {
    "spec": "2.ablations",
    "bug": "norm='post' LM drops the final RMSNorm",
    "run": ["2.ablations"],
    "hinted": ["norm='post' LM without the final RMSNorm"],
}


def run_transformer_lm_ablation(
    vocab_size,
    context_length,
    d_model,
    num_layers,
    num_heads,
    d_ff,
    rope_theta,
    weights,
    in_indices,
    *,
    norm="pre",
    use_rope=True,
    ffn="swiglu",
):
    h = run_embedding(vocab_size, d_model, weights["token_embeddings.weight"], in_indices)
    for i in range(num_layers):
        prefix = f"layers.{i}."
        layer = {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}
        h = run_transformer_block_ablation(
            d_model,
            num_heads,
            d_ff,
            context_length,
            rope_theta,
            layer,
            h,
            norm=norm,
            use_rope=use_rope,
            ffn=ffn,
        )
    if norm == "pre":  # BUG: "post" keeps ln_final too
        h = run_rmsnorm(d_model, 1e-5, weights["ln_final.weight"], h)
    return run_linear(d_model, vocab_size, weights["lm_head.weight"], h)
