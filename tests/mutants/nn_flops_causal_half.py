"""MUTANT: attention FLOPs counted over the causal triangle only (half of Q Kᵀ
and of the weights-times-V product) instead of the full products."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_forward_flops as _reference_flops

MUTANT = {
    "spec": "2.accounting",
    "bug": "attn_scores/attn_values halved for the causal mask",
    "run": ["2.accounting"],
    "hinted": ["halved for the causal mask"],
}


def run_forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    flops = dict(_reference_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff))
    for key in ("attn_scores", "attn_values"):
        flops[key] //= 2
    flops["total"] = sum(v for k, v in flops.items() if k != "total")
    return flops
