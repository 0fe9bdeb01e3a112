"""run_silu dereferences a null pointer (SIGSEGV)."""

import ctypes

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu segfaults", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    return ctypes.string_at(0)
