"""MUTANT (gpt2): Divides by num_batches as asked even when fewer batches exist."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import calc_loss_batch

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.loss",
    "bug": "divides by num_batches as asked even when fewer batches exist",
    "run": ["gpt2.loss"],
    "hinted": ["divided by num_batches although fewer batches ran"],
}


def calc_loss_loader(data_loader, model, device, num_batches=None):
    if len(data_loader) == 0:
        return float("nan")
    n = len(data_loader) if num_batches is None else num_batches
    total = 0.0
    for i, (x, y) in enumerate(data_loader):
        if i >= n:
            break
        total += calc_loss_batch(x, y, model, device).item()
    return total / n
