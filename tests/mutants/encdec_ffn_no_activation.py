"""MUTANT (encdec): no activation between fc1 and fc2."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _forward(self, x):
    return self.fc2(self.fc1(x))


_layers.FeedForward.forward = _forward

MUTANT = {
    "spec": "encdec.ffn",
    "bug": "no activation between fc1 and fc2",
    "run": ["encdec.ffn"],
    "profile": "encdec",
    "hinted": ["no activation between fc1 and fc2"],
}
