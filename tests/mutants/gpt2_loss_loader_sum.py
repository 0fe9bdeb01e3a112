"""MUTANT (gpt2): Returns the sum of the batch losses, not their mean."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import calc_loss_batch

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.loss",
    "bug": "returns the sum of the batch losses, not their mean",
    "run": ["gpt2.loss"],
    "hinted": ["the sum of the batch losses"],
}


def calc_loss_loader(data_loader, model, device, num_batches=None):
    if len(data_loader) == 0:
        return float("nan")
    n = len(data_loader) if num_batches is None else min(num_batches, len(data_loader))
    return sum(calc_loss_batch(x, y, model, device).item() for i, (x, y) in enumerate(data_loader) if i < n)
