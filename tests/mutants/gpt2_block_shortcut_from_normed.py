"""MUTANT (gpt2): The shortcut adds the normalised input instead of the block's input."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import TransformerBlock as _Block

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.block",
    "bug": "the shortcut adds the normalised input instead of the block's input",
    "run": ["gpt2.block"],
    "hinted": ["the attention's shortcut adds the normalised input"],
}


class TransformerBlock(_Block):
    def forward(self, x):
        x = self.norm1(x)
        x = x + self.drop_shortcut(self.att(x))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))
