"""MUTANT (encdec): embeddings not multiplied by sqrt(d_model)."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _embed(self, table, ids):
    pe = _model.sinusoidal_positions(ids.shape[-1], self.d_model, dtype=table.weight.dtype)
    return self.drop(table(ids) + pe)


_model.EncoderDecoder._embed = _embed

MUTANT = {
    "spec": "encdec.model",
    "bug": "embeddings not multiplied by sqrt(d_model)",
    "run": ["encdec.model"],
    "profile": "encdec",
    "hinted": ["embeddings not multiplied by sqrt(d_model)"],
}
