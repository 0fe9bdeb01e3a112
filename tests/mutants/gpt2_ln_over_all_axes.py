"""MUTANT (gpt2): Mean and variance over the whole tensor instead of the last axis."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import LayerNorm as _LayerNorm

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.layernorm",
    "bug": "mean and variance over the whole tensor instead of the last axis",
    "run": ["gpt2.layernorm"],
    "hinted": ["mean and variance over the whole tensor"],
}


class LayerNorm(_LayerNorm):
    def forward(self, x):
        mean, var = x.mean(), x.var(unbiased=False)
        return self.scale * (x - mean) / torch.sqrt(var + self.eps) + self.shift
