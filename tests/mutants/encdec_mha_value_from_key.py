"""MUTANT (encdec): values projected from the key input."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403

_forward = _layers.MultiHeadAttention.forward


def _bad(self, query, key, value, mask=None):
    return _forward(self, query, key, key, mask)


_layers.MultiHeadAttention.forward = _bad

MUTANT = {
    "spec": "encdec.mha",
    "bug": "values projected from the key input",
    "run": ["encdec.mha"],
    "profile": "encdec",
    "hinted": ["values taken from the key input"],
}
