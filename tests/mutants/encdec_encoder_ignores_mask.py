"""MUTANT (encdec): encoder self-attention ignores the source mask."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403

_forward = _model.EncoderLayer.forward


def _unmasked(self, x, src_mask):
    return _forward(self, x, None)


_model.EncoderLayer.forward = _unmasked

MUTANT = {
    "spec": "encdec.encoder_layer",
    "bug": "encoder self-attention ignores the source mask",
    "run": ["encdec.encoder_layer"],
    "profile": "encdec",
    "hinted": ["source mask ignored"],
}
