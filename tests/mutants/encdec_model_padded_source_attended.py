"""MUTANT (encdec): the encoder attends to padded source positions (source mask used in cross-attention only)."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _encode(self, src, src_mask):
    return self.encoder(self._embed(self.src_embed, src), None)


_model.EncoderDecoder.encode = _encode

MUTANT = {
    "spec": "encdec.model",
    "bug": "the encoder attends to padded source positions (source mask used in cross-attention only)",
    "run": ["encdec.model"],
    "profile": "encdec",
    "hinted": ["source mask ignored in the encoder (used in cross-attention only)"],
    "never_hinted": ["source mask ignored in cross-attention"],
}
