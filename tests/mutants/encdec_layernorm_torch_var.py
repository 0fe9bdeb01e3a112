"""MUTANT (encdec): torch.var default (unbiased) inside the root."""

import torch

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _forward(self, x):
    mean = x.mean(-1, keepdim=True)
    return self.weight * (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + self.eps) + self.bias


_layers.LayerNorm.forward = _forward

MUTANT = {
    "spec": "encdec.layernorm",
    "bug": "torch.var default (unbiased) inside the root",
    "run": ["encdec.layernorm"],
    "profile": "encdec",
    "hinted": ["unbiased variance inside the root"],
    # the STRICT near-constant rows test names the same LayerNorm by its epsilon and placement
    "also_named": ["eps 1e-5, inside the root: sqrt(var + eps), unbiased variance"],
    "never_hinted": ["declare layer_norm='annotated'"],
}
