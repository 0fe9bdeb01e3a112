"""MUTANT (encdec): max of the rule's two terms instead of their min.

At one step inside the warmup it gives the rate of another bug (at step 100
of a warmup of 4000, step^-0.5 is what a warmup exponent of -0.5 gives): only
a second input, a whole schedule, tells the two apart."""

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_rate(step, d_model, factor, warmup):
    step = max(step, 1)
    return factor * d_model**-0.5 * max(step**-0.5, step * warmup**-1.5)


MUTANT = {
    "spec": "encdec.rate",
    "bug": "max of the two terms instead of the min",
    "run": ["encdec.rate"],
    "profile": "encdec",
    "hinted": ["max of the two terms instead of the min"],
    "never_hinted": ["warmup exponent"],
}
