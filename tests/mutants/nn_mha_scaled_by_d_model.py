"""MUTANT: multi-head attention scales the scores by 1/sqrt(d_model) instead of
1/sqrt(d_k), the head's dimension."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.nn import attention as _attention

MUTANT = {
    "spec": "2.mha",
    "bug": "scores / sqrt(d_model) in every head (d_model = heads · d_k)",
    "run": ["2.mha"],
    "hinted": ["scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_k)"],
    "never_hinted": ["heads interleaved", "not causal", "explained by"],
}

_causal_attend = _attention.causal_attend


def _scaled_by_d_model(Q, K, V, block=_attention.CAUSAL_BLOCK):
    heads = Q.shape[-3]  # (..., heads, seq, d_k): 1/sqrt(d_k) · sqrt(d_k/d_model) = 1/sqrt(d_model)
    return _causal_attend(Q / heads**0.5, K, V, block)


_attention.causal_attend = _scaled_by_d_model
