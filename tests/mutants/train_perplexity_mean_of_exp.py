"""MUTANT: perplexity as the mean of per-position exp(CE) instead of exp of the mean."""

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.perplexity",
    "bug": "mean of exp(per-position cross-entropy) instead of exp(mean cross-entropy)",
    "run": ["3.perplexity"],
    "hinted": ["mean of per-position exp(CE)"],
}


def run_perplexity(inputs, targets):
    shifted = inputs - inputs.amax(dim=-1, keepdim=True)
    per_position = shifted.exp().sum(dim=-1).log() - shifted.gather(-1, targets[..., None])[..., 0]
    return per_position.exp().mean()  # BUG: Jensen gap
