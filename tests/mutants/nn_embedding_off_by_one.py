"""MUTANT: Embedding looks up row id − 1 (1-based ids)."""

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "2.embedding",
    "bug": "row lookup off by one (W[id - 1])",
    "run": ["2.embedding"],
    "hinted": ["row id-1"],
    "never_hinted": ["row id+1"],
}


def run_embedding(vocab_size, d_model, weights, token_ids):
    return weights[token_ids - 1]
