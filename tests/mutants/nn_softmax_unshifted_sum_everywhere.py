"""MUTANT: softmax shifts the numerator by the row max but sums the unshifted
exps (exp(x − max) / Σ exp(x)), and attention uses that softmax: SDPA, MHA,
the block and the LM all fail because of it."""

import math

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.nn import attention as _attention

MUTANT = {
    "spec": "2.softmax",
    "bug": "exp(x − max) / Σ exp(x): the denominator not shifted, in softmax and so in attention",
    "run": ["2.softmax", "2.sdpa", "2.mha", "2.block"],
    "hinted": [
        "explained by 2.softmax (fix that first)",
        "explained by 2.sdpa (fix that first)",
        "explained by 2.mha (fix that first)",
    ],
    "never_hinted": ["explained by 2.rmsnorm", "explained by 2.swiglu", "explained by 2.rope"],
}


def run_softmax(in_features, dim):
    x = in_features
    return (x - x.amax(dim=dim, keepdim=True)).exp() / x.exp().sum(dim=dim, keepdim=True)


def _attend(Q, K, V, bias=None):
    scores = Q @ K.mT / math.sqrt(Q.shape[-1])
    if bias is not None:
        scores = scores + bias
    return run_softmax(scores, -1) @ V


_attention.attend = _attend
