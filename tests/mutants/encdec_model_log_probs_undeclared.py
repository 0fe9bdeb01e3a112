"""MUTANT (encdec): log-softmax generator without declaring output log_probs."""

import torch

from lmspec.reference.encdec import model as _model
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _generate(self, hidden):
    return torch.log_softmax(self.generator(hidden), dim=-1)


_model.EncoderDecoder.generate = _generate

MUTANT = {
    "spec": "encdec.model",
    "bug": "log-softmax generator without declaring output log_probs",
    "run": ["encdec.model"],
    "profile": "encdec",
    "hinted": ["declare output='log_probs'"],
}
