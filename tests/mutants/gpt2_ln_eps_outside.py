"""MUTANT (gpt2): Eps added to the standard deviation, outside the square root."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import LayerNorm as _LayerNorm

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.layernorm",
    "bug": "eps added to the standard deviation, outside the square root",
    "run": ["gpt2.layernorm"],
    "strict_only": (
        "SPEC §6.1: the placement of the epsilon shows only on near-constant rows, which are STRICT (the "
        "finding names the placement)"
    ),
    "hinted": ["eps added outside the square root"],
}


class LayerNorm(_LayerNorm):
    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        std = x.var(dim=-1, keepdim=True, unbiased=False).sqrt()
        return self.scale * (x - mean) / (std + self.eps) + self.shift
