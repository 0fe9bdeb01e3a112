"""MUTANT (encdec): KL divergence returned while declaring the cross-entropy (the default)."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_label_smoothing_loss(logits, target, smoothing, pad_id):
    vocab = logits.shape[-1]
    log_p = torch.log_softmax(logits.reshape(-1, vocab), dim=-1)
    target = target.reshape(-1)
    keep = target != pad_id
    q = torch.full_like(log_p, smoothing / (vocab - 2))
    q[:, pad_id] = 0.0
    q = q.scatter(1, target.unsqueeze(1), 1 - smoothing)[keep]
    return torch.nn.functional.kl_div(log_p[keep], q, reduction="sum") / keep.sum()


MUTANT = {
    "spec": "encdec.label_smoothing",
    "bug": "KL divergence returned while declaring the cross-entropy (the default)",
    "run": ["encdec.label_smoothing"],
    "profile": "encdec",
    "hinted": ["declare smoothing_loss='kl'"],
}
