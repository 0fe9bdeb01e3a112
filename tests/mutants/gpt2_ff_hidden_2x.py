"""MUTANT (gpt2): Hidden width 2*emb_dim instead of 4*emb_dim."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import FeedForward as _FeedForward

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.feedforward",
    "bug": "hidden width 2*emb_dim instead of 4*emb_dim",
    "run": ["gpt2.feedforward"],
}


class FeedForward(_FeedForward):
    def __init__(self, cfg):
        super().__init__(cfg)
        e = cfg["emb_dim"]
        self.layers[0] = torch.nn.Linear(e, 2 * e)
        self.layers[2] = torch.nn.Linear(2 * e, e)
