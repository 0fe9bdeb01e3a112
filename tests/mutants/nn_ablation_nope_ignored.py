"""MUTANT: the block ablation ignores use_rope=False (NoPE still rotates)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_transformer_block_ablation as _reference_block

MUTANT = {
    "spec": "2.ablations",
    "bug": "use_rope=False not honoured: RoPE always applied",
    "run": ["2.ablations"],
    "hinted": ["use_rope=False not honoured"],
}


def run_transformer_block_ablation(
    d_model,
    num_heads,
    d_ff,
    max_seq_len,
    theta,
    weights,
    in_features,
    *,
    norm="pre",
    use_rope=True,
    ffn="swiglu",
):
    return _reference_block(
        d_model,
        num_heads,
        d_ff,
        max_seq_len,
        theta,
        weights,
        in_features,
        norm=norm,
        use_rope=True,
        ffn=ffn,
    )
