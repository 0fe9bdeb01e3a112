"""SPEC §6.1 LayerNorm, GELU and FeedForward against float64 torch
(``F.layer_norm``, ``F.gelu(approximate="tanh")``, ``F.linear``)."""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lmspec.conformance import tolerances
from lmspec.conformance.asserts import assert_close, assert_shape
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.tolerances import Tolerance

# float32 against float64 on widths up to 64: measured worst 2e-6 on the reference
# and its variants (var(unbiased=False), mean of squares); 10x that
TOL = tolerances.GPT2_LAYERNORM_F32


def _ln_case(seed: int, batch: int, tokens: int, emb: int, std: float, mean: float):
    g = sg.generator(seed)
    x = sg.randn(g, batch, tokens, emb, std=std, mean=mean * std)
    return x, o.norm_weights(g, "", emb)


ln_cases = st.builds(
    _ln_case,
    sg.seeds,
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(4, 64),
    st.sampled_from([0.05, 0.5, 1.0, 3.0]),
    st.sampled_from([0.0, 0.5, -2.0]),  # the mean, in standard deviations
)
# std 0.05: var ~ 2.5e-3, where eps 1e-5 inside or outside the root differ by 0.2%
SMALL_VAR = _ln_case(1, 2, 3, 8, 0.05, 6.0)


@sg.budget(15)
@pytest.mark.spec("gpt2.layernorm")
@given(case=ln_cases)
@example(case=SMALL_VAR)
def test_layernorm_matches_float64(gpt2_layernorm, case):
    """``scale · (x − mean)/sqrt(var + 1e-5) + shift`` over the last axis, biased variance."""
    x, w = case
    out = gpt2_layernorm(emb_dim=x.shape[-1], weights=w, in_features=x)
    assert_shape(out, x.shape, rule="LayerNorm keeps the shape")
    assert_close(
        out,
        o.layernorm(x, w),
        TOL,
        rule="LayerNorm scale·(x−mean)/sqrt(var+1e-5)+shift, var biased (float32 vs float64)",
        hints=[
            (
                "unbiased variance (divides by n−1; the book's LayerNorm uses unbiased=False)",
                lambda: o.layernorm_unbiased(x, w),
            ),
            ("eps added outside the square root", lambda: o.layernorm_eps_outside(x, w)),
        ],
        context=f"x{tuple(x.shape)} std {float(x.std()):.3g}",
    )


@pytest.mark.spec("gpt2.layernorm")
def test_layernorm_initial_scale_one_shift_zero(gpt2_layernorm):
    """A fresh LayerNorm(emb_dim) has scale ones and shift zeros: it only normalises."""
    x = sg.randn(sg.generator(2), 2, 3, 12, std=2.0, mean=1.0)
    out = gpt2_layernorm(emb_dim=12, weights=None, in_features=x)
    expected = o.layernorm(x, {"scale": torch.ones(12), "shift": torch.zeros(12)})
    assert_close(out, expected, TOL, rule="LayerNorm at init: scale 1, shift 0", context="x(2, 3, 12)")


GELU_TOL = Tolerance(1e-6, 1e-6, "float32 vs float64 tanh form; the erf form differs by up to 5e-4")


@sg.budget(10)
@pytest.mark.spec("gpt2.gelu")
@given(seed=sg.seeds, shape=st.sampled_from([(2, 3, 8), (1, 5, 16), (3, 1, 4)]), scale=st.sampled_from([1.0, 2.0, 3.0]))
def test_gelu_is_the_tanh_form(gpt2_gelu, seed, shape, scale):
    """``0.5 x (1 + tanh(sqrt(2/π)(x + 0.044715 x³)))``."""
    x = sg.randn(sg.generator(seed), *shape, std=scale)
    out = gpt2_gelu(in_features=x)
    assert_shape(out, x.shape, rule="GELU keeps the shape")
    assert_close(
        out,
        o.gelu(x),
        GELU_TOL,
        rule="GELU tanh approximation (float32 vs float64)",
        hints=[("exact erf GELU (F.gelu / nn.GELU default) instead of the tanh form", lambda: o.gelu_erf(x))],
        context=f"x{tuple(x.shape)}, |x| <= {float(x.abs().max()):.3g}",
    )


@sg.budget(10)
@pytest.mark.spec("gpt2.feedforward")
@given(seed=sg.seeds, emb=st.sampled_from([4, 8, 16, 24]), tokens=st.integers(1, 6), batch=st.integers(1, 3))
def test_feedforward_matches_float64(gpt2_feedforward, seed, emb, tokens, batch):
    """``Linear(E, 4E)`` → tanh GELU → ``Linear(4E, E)``, with biases (keys layers.0, layers.2)."""
    g = sg.generator(seed)
    w = o.ff_weights(g, emb)
    x = sg.randn(g, batch, tokens, emb)
    out = gpt2_feedforward(cfg=o.cfg(emb=emb, heads=1), weights=w, in_features=x)
    assert_shape(out, x.shape, rule="FeedForward keeps (batch, tokens, emb_dim)")
    assert_close(
        out,
        o.feedforward(x, w),
        Tolerance(5e-5, 5e-5, "two float32 linears vs float64"),
        rule="FeedForward Linear(E,4E) → GELU(tanh) → Linear(4E,E)",
        hints=[
            (
                "exact erf GELU instead of the tanh form",
                lambda: o.linear(o.gelu_erf(o.linear(x, w, "layers.0.")), w, "layers.2."),
            )
        ],
        context=f"x{tuple(x.shape)}",
    )
