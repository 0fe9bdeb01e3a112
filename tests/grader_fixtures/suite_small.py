"""A stand-in conformance suite for the grader's meta-tests (tests/test_grade.py):
a few fast tests on four core items and one extended item, written like the
real suite (spec markers, adapter fixtures, conformance.asserts). Not collected
by ``pytest tests`` (the file name does not start with ``test_``); the grader
runs it with ``--suite tests/grader_fixtures/suite_small.py``."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmspec.conformance.asserts import assert_close
from lmspec.conformance.tolerances import Tolerance

TOL = Tolerance(1e-5, 1e-5, "stand-in: float32 vs float64 on tiny inputs")


def _x() -> torch.Tensor:
    return torch.linspace(-3, 3, 12, dtype=torch.float32).reshape(3, 4)


@pytest.mark.spec("2.softmax")
def test_softmax_matches_formula(run_softmax):
    """softmax(x)_i = exp(x_i) / sum_j exp(x_j) along dim."""
    x = _x()
    e = x.double().exp()
    assert_close(run_softmax(x, -1), e / e.sum(-1, keepdim=True), TOL, rule="softmax formula")


@pytest.mark.spec("2.softmax")
@given(shift=st.floats(-50, 50))
def test_softmax_shift_invariant(run_softmax, shift):
    """Adding a constant along dim does not change softmax."""
    x = _x()
    assert_close(run_softmax(x + shift, -1), run_softmax(x, -1), TOL, rule="softmax shift invariance")


@pytest.mark.spec("2.softmax")
def test_softmax_finite_for_large_inputs(run_softmax):
    """softmax(x + 1000) stays finite."""
    out = run_softmax(_x() + 1000, -1)
    assert bool(torch.isfinite(out).all()), "softmax(x + 1000) is not finite"


@pytest.mark.spec("2.silu")
def test_silu_matches_formula(run_silu):
    """SiLU(x) = x * sigmoid(x)."""
    x = _x().double()
    assert_close(run_silu(_x()), x / (1 + (-x).exp()), TOL, rule="silu formula")


@pytest.mark.spec("2.linear")
def test_linear_matches_formula(run_linear):
    """y = x W^T."""
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 10
    x = _x()
    assert_close(run_linear(4, 3, w, x), x.double() @ w.double().T, TOL, rule="linear y = x W^T")


@pytest.mark.spec("3.cosine_schedule")
@pytest.mark.parametrize("t", [0, 7, 14, 21, 24])
def test_cosine_schedule_values(run_get_lr_cosine_schedule, t):
    """Warmup, cosine, then constant (alpha_max 1, alpha_min 0.1, T_w 7, T_c 21)."""
    if t < 7:
        want = t / 7
    elif t <= 21:
        want = 0.1 + 0.5 * (1 + math.cos(math.pi * (t - 7) / 14)) * 0.9
    else:
        want = 0.1
    got = run_get_lr_cosine_schedule(t, 1.0, 0.1, 7, 21)
    assert abs(got - want) < 1e-9, f"lr at t={t}: got {got}, expected {want}"


@pytest.mark.spec("4.generation")
def test_temperature_softmax_sums_to_one(run_temperature_softmax):
    """Temperature softmax is a probability distribution."""
    probs = run_temperature_softmax(torch.tensor([1.0, 2.0, 3.0]), 0.5)
    assert abs(float(probs.sum()) - 1) < 1e-5
