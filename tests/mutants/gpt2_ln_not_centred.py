"""MUTANT (gpt2): Normalises by the root mean square without subtracting the mean."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import LayerNorm as _LayerNorm

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.layernorm",
    "bug": "normalises by the root mean square without subtracting the mean",
    "run": ["gpt2.layernorm"],
    "hinted": ["not centred"],
}


class LayerNorm(_LayerNorm):
    def forward(self, x):
        return self.scale * x / torch.sqrt(x.square().mean(dim=-1, keepdim=True) + self.eps) + self.shift
