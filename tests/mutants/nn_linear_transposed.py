"""MUTANT: Linear multiplies by W instead of Wᵀ (treats the weight as (d_in, d_out))."""

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.linear",
    "bug": "y = x W instead of x Wᵀ (transposed weight)",
    "run": ["2.linear"],
    "hinted": ["transposed weight"],
}


def run_linear(d_in, d_out, weights, in_features):
    return in_features @ weights
