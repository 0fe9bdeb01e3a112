"""MUTANT (encdec): positions added before the sqrt(d_model) scaling."""

import math

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _embed(self, table, ids):
    pe = _model.sinusoidal_positions(ids.shape[-1], self.d_model, dtype=table.weight.dtype)
    return self.drop((table(ids) + pe) * math.sqrt(self.d_model))


_model.EncoderDecoder._embed = _embed

MUTANT = {
    "spec": "encdec.model",
    "bug": "positions added before the sqrt(d_model) scaling",
    "run": ["encdec.model"],
    "profile": "encdec",
    "hinted": ["positions added before the sqrt(d_model) scaling"],
}
