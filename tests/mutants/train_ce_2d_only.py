"""MUTANT: cross-entropy written for the official test's (batch, vocab) logits
only: it indexes rows with arange(batch), which breaks on (batch, seq, vocab)
logits (the handout: "any additional batch dimensions")."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.cross_entropy",
    "bug": "logits[arange(batch), targets]: only 2-D (batch, vocab) logits work",
    "run": ["3.cross_entropy"],
    "hinted": ["only (batch, vocab) logits handled"],
}


def run_cross_entropy(inputs, targets):
    shifted = inputs - inputs.max(dim=-1, keepdim=True).values
    log_sum_exp = shifted.exp().sum(dim=-1).log()
    target_logit = shifted[torch.arange(inputs.shape[0]), targets]  # BUG: 2-D only
    return (log_sum_exp - target_logit).mean()
