"""MUTANT: the block adds the feed-forward's output twice (y = z + 2·FFN(RMSNorm₂(z)),
a residual line pasted twice), and the LM is made of those blocks: the LM's
failure is the block's."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.nn import block as _block

MUTANT = {
    "spec": "2.block",
    "bug": "y = z + FFN(RMSNorm₂(z)) + FFN(RMSNorm₂(z)), in every block of the LM",
    "run": ["2.block", "2.lm"],
    "hinted": ["explained by 2.block (fix that first)"],
    "never_hinted": ["explained by 2.rmsnorm", "explained by 2.mha", "explained by 2.swiglu", "final RMSNorm"],
}


def _forward(self, x, token_positions=None):
    z = x + self.attn(self.ln1(x), token_positions)
    f = self.ffn(self.ln2(z))
    return z + f + f


_block.TransformerBlock.forward = _forward  # a module attribute: a TransformerBlock name would read as gpt2
