"""MUTANT (gpt2): Norm1 used before the feed-forward too (norm2 unused)."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import TransformerBlock as _Block

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.block",
    "bug": "norm1 used before the feed-forward too (norm2 unused)",
    "run": ["gpt2.block"],
    "hinted": ["norm1 used before the feed-forward too"],
}


class TransformerBlock(_Block):
    def forward(self, x):
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return x + self.drop_shortcut(self.ff(self.norm1(x)))
