"""MUTANT: temperature applied to the probabilities (softmax(v) / tau) instead of the logits."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "4.generation",
    "bug": ("softmax(v) / tau instead of softmax(v / tau): not a distribution, temperature has no effect on sampling"),
    "run": ["4.generation"],
    "hinted": ["temperature applied after the softmax"],
}


def run_temperature_softmax(logits, temperature):
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    probs = shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)
    return probs / temperature  # BUG
