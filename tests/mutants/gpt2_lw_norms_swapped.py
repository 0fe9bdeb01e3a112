"""MUTANT (gpt2): Ln_1 loaded into norm2 and ln_2 into norm1."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import load_weights_into_gpt as _load

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.load_weights",
    "bug": "ln_1 loaded into norm2 and ln_2 into norm1",
    "run": ["gpt2.load_weights"],
    "hinted": ["ln_1 loaded into norm2 and ln_2 into norm1"],
}


def load_weights_into_gpt(gpt, params):
    _load(gpt, params)
    for blk, src in zip(gpt.trf_blocks, params["blocks"]):
        with torch.no_grad():
            blk.norm2.scale.copy_(torch.tensor(src["ln_1"]["g"]))
            blk.norm2.shift.copy_(torch.tensor(src["ln_1"]["b"]))
            blk.norm1.scale.copy_(torch.tensor(src["ln_2"]["g"]))
            blk.norm1.shift.copy_(torch.tensor(src["ln_2"]["b"]))
