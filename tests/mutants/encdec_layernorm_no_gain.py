"""MUTANT (encdec): gain and bias never applied."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _forward(self, x):
    centred = x - x.mean(-1, keepdim=True)
    return centred / (centred.square().mean(-1, keepdim=True) + self.eps).sqrt()


_layers.LayerNorm.forward = _forward

MUTANT = {
    "spec": "encdec.layernorm",
    "bug": "gain and bias never applied",
    "run": ["encdec.layernorm"],
    "profile": "encdec",
    "hinted": ["gain and bias ignored"],
}
