"""MUTANT (gpt2): Exact erf GELU (torch.nn.functional.gelu default) instead of the tanh approximation."""

import math

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GELU as _GELU

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.gelu",
    "bug": "exact erf GELU (torch.nn.functional.gelu default) instead of the tanh approximation",
    "run": ["gpt2.gelu"],
    "hinted": ["exact erf GELU"],
}


class GELU(_GELU):
    def forward(self, x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0)))
