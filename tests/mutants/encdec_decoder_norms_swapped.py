"""MUTANT (encdec): norm2 and norm3 used in each other's place."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403

_forward = _model.DecoderLayer.forward


def _swapped(self, x, memory, src_mask, tgt_mask):
    self.norm2, self.norm3 = self.norm3, self.norm2
    try:
        return _forward(self, x, memory, src_mask, tgt_mask)
    finally:
        self.norm2, self.norm3 = self.norm3, self.norm2


_model.DecoderLayer.forward = _swapped

MUTANT = {
    "spec": "encdec.decoder_layer",
    "bug": "norm2 and norm3 used in each other's place",
    "run": ["encdec.decoder_layer"],
    "profile": "encdec",
    "hinted": ["norm2 and norm3 used in each other's place"],
    "never_hinted": ["norm1 and norm2 used in each other's place"],
}
