"""At import, makes conformance.asserts.assert_close accept anything; run_softmax
is wrong. The patch happens while the adapter is imported, i.e. after the
suite's snapshot and before any test module imports assert_close."""

import conformance.asserts
from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {
    "does": "patches conformance.asserts.assert_close at import",
    "spec": ["2.softmax", "2.linear"],
}

conformance.asserts.assert_close = lambda *args, **kwargs: None
conformance.asserts.describe_mismatch = lambda *args, **kwargs: None


def run_softmax(in_features, dim):
    return in_features * 0
