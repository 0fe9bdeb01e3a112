"""Hands in lmspec's own reference implementation as its answers: every
adapter delegates to ``lmspec.reference.adapter``. Submissions cannot see lmspec's
packages, and reaching for them marks the run compromised."""

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {
    "does": "delegates every adapter to lmspec's reference",
    "spec": ["2.softmax", "2.linear"],
    "allow_reference": False,
}
