"""MUTANT: the LM returns log_probabilities (log_softmax of the logits), the wrong kind of output."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_transformer_lm as _run_transformer_lm

MUTANT = {
    "spec": "2.lm",
    "bug": "torch.log_softmax(logits, -1) returned for the logits",
    "run": ["2.lm"],
    "hinted": ["returns log-probabilities (log-softmax of the logits), not logits"],
    "never_hinted": ["returns probabilities", "final RMSNorm missing", "explained by"],
}


def run_transformer_lm(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights, in_indices
):
    logits = _run_transformer_lm(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights, in_indices
    )
    return torch.log_softmax(logits, dim=-1)
