"""MUTANT (encdec): padding rows counted in the mean."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_label_smoothing_loss(logits, target, smoothing, pad_id):
    vocab = logits.shape[-1]
    log_p = torch.log_softmax(logits.reshape(-1, vocab), dim=-1)
    target = target.reshape(-1)
    q = torch.full_like(log_p, smoothing / (vocab - 2))
    q[:, pad_id] = 0.0
    q = q.scatter(1, target.unsqueeze(1), 1 - smoothing)
    return -(q * log_p).sum(-1).mean()


MUTANT = {
    "spec": "encdec.label_smoothing",
    "bug": "padding rows counted in the mean",
    "run": ["encdec.label_smoothing"],
    "profile": "encdec",
    "hinted": ["padding rows counted in the mean"],
}
