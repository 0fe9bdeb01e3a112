"""MUTANT (gpt2): Sqrt(2*pi) instead of sqrt(2/pi)."""

import math

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GELU as _GELU

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.gelu",
    "bug": "sqrt(2*pi) instead of sqrt(2/pi)",
    "run": ["gpt2.gelu"],
    "hinted": ["sqrt(2·π) instead of sqrt(2/π)"],
}


class GELU(_GELU):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 * math.pi) * (x + 0.044715 * x**3)))
