"""MUTANT (gpt2): 0.04715 instead of 0.044715 for the cubic term."""

import math

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GELU as _GELU

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.gelu",
    "bug": "0.04715 instead of 0.044715 for the cubic term",
    "run": ["gpt2.gelu"],
    "hinted": ["cubic coefficient 0.04715 instead of 0.044715"],
}


class GELU(_GELU):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.04715 * x**3)))
