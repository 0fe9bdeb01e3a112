"""MUTANT (encdec): smoothing mass on the padding class."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_label_smoothing_loss(logits, target, smoothing, pad_id):
    vocab = logits.shape[-1]
    log_p = torch.log_softmax(logits.reshape(-1, vocab), dim=-1)
    target = target.reshape(-1)
    keep = target != pad_id
    q = torch.full_like(log_p, smoothing / (vocab - 2)).scatter(1, target.unsqueeze(1), 1 - smoothing)
    return -(q * log_p).sum(-1)[keep].mean()


MUTANT = {
    "spec": "encdec.label_smoothing",
    "bug": "smoothing mass on the padding class",
    "run": ["encdec.label_smoothing"],
    "profile": "encdec",
    "hinted": ["smoothing mass on the padding class"],
}
