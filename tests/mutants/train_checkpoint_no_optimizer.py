"""MUTANT: checkpoints without the optimizer state."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.checkpoint",
    "bug": "save_checkpoint stores model and iteration only; resuming restarts AdamW's m, v, t",
    "run": ["3.checkpoint"],
    "hinted": ["optimizer state not saved or not restored", "optimizer.state_dict() not saved or not loaded"],
    "never_hinted": ["explained by"],
}


def run_save_checkpoint(model, optimizer, iteration, out):
    torch.save({"model": model.state_dict(), "iteration": iteration}, out)  # BUG: no optimizer


def run_load_checkpoint(src, model, optimizer):
    payload = torch.load(src, weights_only=True)
    model.load_state_dict(payload["model"])
    return payload["iteration"]
