"""MUTANT: softmax returns log-probabilities (log-softmax), the wrong kind of output."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.softmax",
    "bug": "log_softmax(x, dim) returned for softmax(x, dim)",
    "run": ["2.softmax"],
    "hinted": ["returns log-softmax (log-probabilities), not probabilities"],
    "never_hinted": ["normalised over the wrong dim", "no max subtraction"],
}


def run_softmax(in_features, dim):
    return torch.log_softmax(in_features, dim=dim)
