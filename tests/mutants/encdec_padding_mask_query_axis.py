"""MUTANT (encdec): target padding mask on the query axis instead of the key axis."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_target_mask(tgt, pad_id):
    n = tgt.shape[-1]
    return (tgt != pad_id).unsqueeze(-1) & torch.ones(n, n, dtype=torch.bool).tril()


MUTANT = {
    "spec": "encdec.masks",
    "bug": "target padding mask on the query axis instead of the key axis",
    "run": ["encdec.masks"],
    "profile": "encdec",
    "hinted": ["padding on the query axis instead of the key axis"],
    "strict_only": "targets are padded at the end only, so a real query i's keys j <= i are all real: padding on "
    "the query axis changes only the rows of padding queries, which no scored output reads (STRICT checks them)",
}
