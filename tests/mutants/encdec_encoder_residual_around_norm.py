"""MUTANT (encdec): residual around the norm: x + LN(sublayer(x))."""

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _residual(x, norm, sublayer, drop, pre):
    return x + drop(norm(sublayer(x)))


_model._residual = _residual

MUTANT = {
    "spec": "encdec.encoder_layer",
    "bug": "residual around the norm: x + LN(sublayer(x))",
    "run": ["encdec.encoder_layer"],
    "profile": "encdec",
    "hinted": ["residual around the norm: x + LN(sublayer(x))"],
    "never_hinted": ["residual left out"],
}
