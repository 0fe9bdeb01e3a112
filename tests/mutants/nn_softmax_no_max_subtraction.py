"""MUTANT: softmax without subtracting the max (overflows for x + 1000)."""

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.softmax",
    "bug": "exp(x) / sum exp(x) without max subtraction",
    "run": ["2.softmax"],
    "hinted": ["no max subtraction before exp"],
}


def run_softmax(in_features, dim):
    e = in_features.exp()
    return e / e.sum(dim=dim, keepdim=True)
