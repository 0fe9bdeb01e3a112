"""MUTANT (gpt2): Cross-entropy of the last position only."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.loss",
    "bug": "cross-entropy of the last position only",
    "run": ["gpt2.loss"],
    "hinted": ["the loss of the last position only"],
}


def calc_loss_batch(input_batch, target_batch, model, device):
    logits = model(input_batch.to(device))
    return torch.nn.functional.cross_entropy(logits[:, -1], target_batch[:, -1].to(device))
