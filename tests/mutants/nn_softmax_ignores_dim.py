"""MUTANT: softmax always normalises over the last dim, ignoring ``dim``."""

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.softmax",
    "bug": "normalises over the last dim whatever dim is",
    "run": ["2.softmax"],
    "hinted": ["wrong dim (last)"],
}


def run_softmax(in_features, dim):
    e = (in_features - in_features.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)
