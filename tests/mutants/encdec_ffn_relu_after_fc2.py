"""MUTANT (encdec): ReLU on the wrong side (after fc2)."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _forward(self, x):
    return self.fc2(self.fc1(x)).clamp_min(0.0)


_layers.FeedForward.forward = _forward

MUTANT = {
    "spec": "encdec.ffn",
    "bug": "ReLU on the wrong side (after fc2)",
    "run": ["encdec.ffn"],
    "profile": "encdec",
    "hinted": ["ReLU after fc2"],
}
