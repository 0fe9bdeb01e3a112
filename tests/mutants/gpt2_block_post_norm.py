"""MUTANT (gpt2): Post-norm: the LayerNorm after each residual addition."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import TransformerBlock as _Block

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.block",
    "bug": "post-norm: the LayerNorm after each residual addition",
    "run": ["gpt2.block"],
    "hinted": ["post-norm"],
    "never_hinted": ["explained by"],
}


class TransformerBlock(_Block):
    def forward(self, x):
        x = self.norm1(x + self.drop_shortcut(self.att(x)))
        return self.norm2(x + self.drop_shortcut(self.ff(x)))
