"""MUTANT (encdec): pre-norm layers (with final norms) while declaring nothing (post-norm)."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403

_residual = _model._residual


def _always_pre(x, norm, sublayer, drop, pre):
    return _residual(x, norm, sublayer, drop, True)


_model._residual = _always_pre

MUTANT = {
    "spec": "encdec.encoder_layer",
    "bug": "pre-norm layers (with final norms) while declaring nothing (post-norm)",
    "run": ["encdec.encoder_layer"],
    "profile": "encdec",
    "hinted": ["declare norm='pre'"],
}
