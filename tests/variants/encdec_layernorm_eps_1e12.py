"""VARIANT: the encdec reference with BERT-style code's LayerNorm epsilon
(1e-12 inside the root). The paper names no epsilon: every MUST test
passes, and the STRICT near-constant-row test's finding names 1e-12."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403

_init = _layers.LayerNorm.__init__


def _eps_1e12(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.eps = 1e-12


_layers.LayerNorm.__init__ = _eps_1e12

VARIANT = {"what": "LayerNorm eps 1e-12 (BERT-style)", "profile": "encdec", "findings": ["eps 1e-12"]}
