"""MUTANT (gpt2): Scale initialised to zeros instead of ones."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import LayerNorm as _LayerNorm

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.layernorm",
    "bug": "scale initialised to zeros instead of ones",
    "run": ["gpt2.layernorm"],
    "hinted": ["scale initialised to zeros"],
}


class LayerNorm(_LayerNorm):
    def __init__(self, emb_dim):
        super().__init__(emb_dim)
        self.scale = torch.nn.Parameter(torch.zeros(emb_dim))
