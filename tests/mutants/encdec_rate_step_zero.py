"""MUTANT (encdec): step 0 not treated as 1 (0^-0.5)."""

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_rate(step, d_model, factor, warmup):
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


MUTANT = {"spec": "encdec.rate", "bug": "step 0 not treated as 1 (0^-0.5)", "run": ["encdec.rate"], "profile": "encdec"}
