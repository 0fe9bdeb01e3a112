"""MUTANT (encdec): target ids embedded with the source table."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403

_decode = _model.EncoderDecoder.decode


def _decode_with_src_table(self, memory, src_mask, tgt, tgt_mask):
    return self.decoder(self._embed(self.src_embed, tgt), src_mask, tgt_mask, memory=memory)


_model.EncoderDecoder.decode = _decode_with_src_table

MUTANT = {
    "spec": "encdec.model",
    "bug": "target ids embedded with the source table",
    "run": ["encdec.model"],
    "profile": "encdec",
    "hinted": ["target ids embedded with the source table"],
}
