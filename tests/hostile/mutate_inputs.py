"""Correct answers, but run_silu and run_linear change their arguments in
place afterwards (the input zeroed, a weight scaled): a STRICT finding,
never a failure of the scored tests, never a corrupted oracle."""

import lmspec.reference.adapter as _ref
from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "mutates its inputs after computing correct answers", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    out = _ref.run_silu(in_features)
    in_features.zero_()
    return out


def run_linear(d_in, d_out, weights, in_features):
    out = _ref.run_linear(d_in, d_out, weights, in_features)
    weights.mul_(2.0)
    return out
