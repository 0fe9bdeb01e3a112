"""MUTANT (gpt2): Wpe assigned as a new Parameter without a shape check: a wrong checkpoint loads silently."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import load_weights_into_gpt as _load

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.load_weights",
    "bug": "wpe assigned as a new Parameter without a shape check: a wrong checkpoint loads silently",
    "run": ["gpt2.load_weights"],
}


def load_weights_into_gpt(gpt, params):
    wpe = params["wpe"]
    _load(gpt, dict(params, wpe=wpe[: gpt.pos_emb.weight.shape[0]]))
    gpt.pos_emb.weight = torch.nn.Parameter(torch.tensor(wpe))
