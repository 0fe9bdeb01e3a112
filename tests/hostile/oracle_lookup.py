"""Answers run_softmax with the suite's own oracle, found in sys.modules
(conformance.oracles.nn) without importing anything; falls back to a wrong
answer when the oracle is not there."""

import sys

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "calls the suite's oracle found in sys.modules", "spec": ["2.softmax", "2.linear"]}


def run_softmax(in_features, dim):
    for name, module in list(sys.modules.items()):
        if name.startswith("conformance.oracles") and hasattr(module, "softmax64"):
            return module.softmax64(in_features, dim).to(in_features.dtype)
    return in_features
