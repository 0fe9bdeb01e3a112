"""MUTANT (encdec): cross-attention keys and values from the decoder instead of the encoder output."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403

_forward = _model.DecoderLayer.forward


def _self_memory(self, x, memory, src_mask, tgt_mask):
    return _forward(self, x, x, None, tgt_mask)


_model.DecoderLayer.forward = _self_memory

MUTANT = {
    "spec": "encdec.decoder_layer",
    "bug": "cross-attention keys and values from the decoder instead of the encoder output",
    "run": ["encdec.decoder_layer"],
    "profile": "encdec",
    "hinted": ["cross-attention's keys and values from the layer's input x"],
    "never_hinted": ["the decoder's own state"],
}
