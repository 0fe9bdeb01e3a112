"""MUTANT: cross-entropy with a naive logsumexp (no max subtraction)."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.cross_entropy",
    "bug": "log(sum(exp(o))) without subtracting the max: overflows for logits x 1000",
    "run": ["3.cross_entropy"],
    "hinted": ["no max subtraction"],
}


def run_cross_entropy(inputs, targets):
    log_sum_exp = torch.log(torch.exp(inputs).sum(dim=-1))  # BUG: exp(1000) = inf
    target_logit = inputs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (log_sum_exp - target_logit).mean()
