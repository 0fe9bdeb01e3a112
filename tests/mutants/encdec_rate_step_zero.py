"""MUTANT (encdec): step 0 not treated as 1 (0^-0.5)."""

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_rate(step, d_model, factor, warmup):
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


MUTANT = {
    "spec": "encdec.rate",
    "bug": "step 0 not treated as 1 (0^-0.5)",
    "run": ["encdec.rate"],
    "profile": "encdec",
    "strict_only": "the formula is undefined at step 0 (SPEC §6.2): taking it as 1 is STRICT, and the "
    "ZeroDivisionError there is test_rate_step_zero's finding, with its likely cause",
    "hinted": ["the formula evaluated at step 0"],
}
