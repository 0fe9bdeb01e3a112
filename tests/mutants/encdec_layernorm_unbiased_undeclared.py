"""MUTANT (encdec): the annotated LayerNorm (unbiased std + eps) without declaring it."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403

_init = _layers.LayerNorm.__init__


def _annotated(self, d_model, variant="biased", eps=None, device=None, dtype=None):
    _init(self, d_model, "annotated", None, device, dtype)


_layers.LayerNorm.__init__ = _annotated

MUTANT = {
    "spec": "encdec.layernorm",
    "bug": "the annotated LayerNorm (unbiased std + eps) without declaring it",
    "run": ["encdec.layernorm"],
    "profile": "encdec",
    "hinted": ["declare layer_norm='annotated'"],
    # the STRICT near-constant rows test names the same LayerNorm by its epsilon and placement
    "also_named": ["eps 1e-6, outside the root: std + eps, unbiased variance"],
    "never_hinted": ["unbiased variance inside the root"],
}
