"""MUTANT (encdec): fairseq's smoothing (ε / (V − 1) on every class but the
true one, padding included) while declaring nothing (the annotated smoothing)."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_label_smoothing_loss(logits, target, smoothing, pad_id):
    vocab = logits.shape[-1]
    log_p = torch.log_softmax(logits.reshape(-1, vocab), dim=-1)
    target = target.reshape(-1)
    keep = target != pad_id
    q = torch.full_like(log_p, smoothing / (vocab - 1)).scatter(1, target.unsqueeze(1), 1 - smoothing)
    return -(q * log_p)[keep].sum() / keep.sum()


MUTANT = {
    "spec": "encdec.label_smoothing",
    "bug": "fairseq's smoothing (ε / (V − 1) off the true class) while declaring the annotated one",
    "run": ["encdec.label_smoothing"],
    "profile": "encdec",
    "hinted": ["declare label_smoothing='others'"],
}
