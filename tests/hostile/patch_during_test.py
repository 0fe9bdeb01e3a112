"""Tampers late: the first call of run_silu replaces describe_mismatch (what
every assert_close relies on) and returns a wrong answer."""

import lmspec.reference.adapter as _ref
from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "patches conformance.asserts during a test", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    import conformance.asserts

    conformance.asserts.describe_mismatch = lambda *args, **kwargs: None
    return _ref.run_silu(in_features) + 1
