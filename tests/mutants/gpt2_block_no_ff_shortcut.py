"""MUTANT (gpt2): The feed-forward's shortcut is missing."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import TransformerBlock as _Block

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.block",
    "bug": "the feed-forward's shortcut is missing",
    "run": ["gpt2.block"],
    "hinted": ["the feed-forward's shortcut left out"],
}


class TransformerBlock(_Block):
    def forward(self, x):
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return self.drop_shortcut(self.ff(self.norm2(x)))
