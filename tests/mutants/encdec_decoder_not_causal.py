"""MUTANT (encdec): decoder self-attention without the target mask."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403

_forward = _model.DecoderLayer.forward


def _unmasked(self, x, memory, src_mask, tgt_mask):
    return _forward(self, x, memory, src_mask, None)


_model.DecoderLayer.forward = _unmasked

MUTANT = {
    "spec": "encdec.decoder_layer",
    "bug": "decoder self-attention without the target mask",
    "run": ["encdec.decoder_layer"],
    "profile": "encdec",
    "hinted": ["target mask ignored (not causal)"],
}
