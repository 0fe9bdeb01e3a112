"""MUTANT: the parameter count assumes the LM head is tied to the embedding."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_count_parameters as _reference_count

MUTANT = {
    "spec": "2.accounting",
    "bug": "lm_head not counted (assumes tied embeddings)",
    "run": ["2.accounting"],
    "hinted": ["one vocab_size×d_model matrix not counted"],
}


def run_count_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    return _reference_count(vocab_size, context_length, d_model, num_layers, num_heads, d_ff) - vocab_size * d_model
