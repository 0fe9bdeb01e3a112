"""MUTANT (encdec): causal mask off by one (query i also sees key i + 1)."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_target_mask(tgt, pad_id):
    n = tgt.shape[-1]
    return (tgt != pad_id).unsqueeze(-2) & torch.ones(n, n, dtype=torch.bool).tril(1)


MUTANT = {
    "spec": "encdec.masks",
    "bug": "causal mask off by one (query i also sees key i + 1)",
    "run": ["encdec.masks"],
    "profile": "encdec",
    "hinted": ["causal mask off by one"],
}
