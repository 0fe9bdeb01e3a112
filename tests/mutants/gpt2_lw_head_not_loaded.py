"""MUTANT (gpt2): Out_head keeps its random weight instead of getting wte."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import load_weights_into_gpt as _load

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.load_weights",
    "bug": "out_head keeps its random weight instead of getting wte",
    "run": ["gpt2.load_weights"],
}


def load_weights_into_gpt(gpt, params):
    head = gpt.out_head.weight.detach().clone()
    _load(gpt, params)
    with torch.no_grad():
        gpt.out_head.weight.copy_(head)
