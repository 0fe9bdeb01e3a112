"""MUTANT (encdec): warmup term step · warmup^-0.5 instead of ^-1.5."""

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_rate(step, d_model, factor, warmup):
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-0.5)


MUTANT = {
    "spec": "encdec.rate",
    "bug": "warmup term step · warmup^-0.5 instead of ^-1.5",
    "run": ["encdec.rate"],
    "profile": "encdec",
    "hinted": ["warmup exponent"],
    "never_hinted": ["max of the two terms"],
}
