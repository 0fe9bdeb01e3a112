"""MUTANT (gpt2): LayerNorm normalises by the root mean square without
subtracting the mean, and every block and the model use that LayerNorm: their
failures are the LayerNorm's."""

import torch

from lmspec.reference import gpt2 as _gpt2
from lmspec.reference.gpt2 import *  # noqa: F403

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.layernorm",
    "bug": "x / rms(x) without centring, in LayerNorm and so in every block and the model",
    "run": ["gpt2.layernorm", "gpt2.block", "gpt2.model"],
    "hinted": ["explained by gpt2.layernorm (fix that first)", "not centred"],
    "never_hinted": ["explained by gpt2.mha", "explained by gpt2.feedforward", "explained by gpt2.block"],
}


def _forward(self, x):
    return self.scale * x / torch.sqrt(x.square().mean(dim=-1, keepdim=True) + self.eps) + self.shift


_gpt2.LayerNorm.forward = _forward
