"""MUTANT (gpt2): Torch.var with its default unbiased=True (divides by n-1)."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import LayerNorm as _LayerNorm

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.layernorm",
    "bug": "torch.var with its default unbiased=True (divides by n-1)",
    "run": ["gpt2.layernorm"],
    "hinted": ["unbiased variance"],
}


class LayerNorm(_LayerNorm):
    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        return self.scale * (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + self.eps) + self.shift
