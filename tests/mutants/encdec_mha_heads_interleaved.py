"""MUTANT (encdec): heads taken as interleaved columns instead of contiguous blocks."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _heads(self, x):
    return x.unflatten(-1, (-1, self.num_heads)).transpose(-1, -2).transpose(-2, -3)


_layers.MultiHeadAttention._heads = _heads

MUTANT = {
    "spec": "encdec.mha",
    "bug": "heads taken as interleaved columns instead of contiguous blocks",
    "run": ["encdec.mha"],
    "profile": "encdec",
    "hinted": ["heads taken as interleaved columns"],
}
