"""MUTANT (gpt2): ReLU between the two linears instead of GELU."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import FeedForward as _FeedForward

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.feedforward",
    "bug": "ReLU between the two linears instead of GELU",
    "run": ["gpt2.feedforward"],
    "hinted": ["ReLU instead of GELU"],
}


class FeedForward(_FeedForward):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.layers[1] = torch.nn.ReLU()
