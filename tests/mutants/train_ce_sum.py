"""MUTANT: cross-entropy summed over positions instead of averaged."""

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.cross_entropy",
    "bug": "sum over positions instead of the mean",
    "run": ["3.cross_entropy"],
    "hinted": ["summed over positions instead of the mean"],
}


def run_cross_entropy(inputs, targets):
    shifted = inputs - inputs.amax(dim=-1, keepdim=True)
    log_sum_exp = shifted.exp().sum(dim=-1).log()
    target_logit = shifted.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (log_sum_exp - target_logit).sum()  # BUG: sum
