"""MUTANT (encdec): torch's label smoothing (epsilon / V everywhere) without declaring it."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_label_smoothing_loss(logits, target, smoothing, pad_id):
    vocab = logits.shape[-1]
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, vocab), target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing
    )


MUTANT = {
    "spec": "encdec.label_smoothing",
    "bug": "torch's label smoothing (epsilon / V everywhere) without declaring it",
    "run": ["encdec.label_smoothing"],
    "profile": "encdec",
    "hinted": ["declare label_smoothing='torch'"],
}
