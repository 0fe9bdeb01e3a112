"""MUTANT (encdec): projection biases ignored."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _forward(self, x):
    return x @ self.weight.T


_layers.Linear.forward = _forward

MUTANT = {
    "spec": "encdec.mha",
    "bug": "projection biases ignored",
    "run": ["encdec.mha"],
    "profile": "encdec",
    "hinted": ["biases ignored"],
}
