"""An in-place SiLU that zeroes its input and returns it: with inputs shared
between the implementation and the oracle, the oracle would see zeros too and
agree. Every call gets its own copy, so this fails."""

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu zeroes its input in place and returns it", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    return in_features.zero_()
