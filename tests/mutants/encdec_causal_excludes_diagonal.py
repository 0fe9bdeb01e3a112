"""MUTANT (encdec): causal mask excludes the diagonal (j < i)."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_target_mask(tgt, pad_id):
    n = tgt.shape[-1]
    return (tgt != pad_id).unsqueeze(-2) & torch.ones(n, n, dtype=torch.bool).tril(-1)


MUTANT = {
    "spec": "encdec.masks",
    "bug": "causal mask excludes the diagonal (j < i)",
    "run": ["encdec.masks"],
    "profile": "encdec",
    "hinted": ["causal mask excludes the diagonal"],
}
