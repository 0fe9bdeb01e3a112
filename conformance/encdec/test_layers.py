"""SPEC §6.2 position-wise FFN, LayerNorm and sinusoidal positions.

FFN: ``fc2(act(fc1 x))`` with biases, ReLU or the declared GELU (exact or
tanh-approximated: the texts use both). LayerNorm: the paper's (biased
variance, eps 1e-5 inside the root) or the declared annotated variant
(unbiased std, eps 1e-6 added to it). Positions: interleaved sin/cos, the
formula in float64.
"""

import pytest
import torch

from lmspec.conformance.asserts import assert_close, assert_shape
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import conventions, expected  # noqa: F401  (fixture)
from lmspec.conformance.encdec.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import other

SEEDS = [0, 1, 2]


# --- FFN -----------------------------------------------------------------------------------------------
def _ffn_case(seed: int, d: int, d_ff: int):
    g = c.generator(200 + seed)
    return d, d_ff, c.ffn_weights(g, d, d_ff), c.randn(g, 2, 5, d)


def _observed_ffn(run_feed_forward, case, conv):
    d, d_ff, w, x = case
    out = run_feed_forward(d_model=d, d_ff=d_ff, **dict(zip(("weights", "in_features"), c.fresh(w, x))))
    return out, KNOWN_BUGS.thunks("encdec.ffn", w, x, conv)


SECOND_FFN = (_ffn_case(7, 12, 48), _ffn_case(8, 24, 96))


@pytest.mark.spec("encdec.ffn")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("d", "d_ff"), [(16, 64), (8, 32)])
def test_feed_forward(run_feed_forward, conventions, seed, d, d_ff):  # noqa: F811
    """fc2(act(fc1(x))) with biases, act as declared (ReLU by default)."""
    case = _ffn_case(seed, d, d_ff)
    _, _, w, x = case
    out, bugs = _observed_ffn(run_feed_forward, case, conventions)
    assert_shape(out, (2, 5, d), rule="FFN output is (..., d_model)")
    want = expected(conventions, lambda conv: o.feed_forward(w, x, conv.activation), out, c.TOL_LAYER)
    assert_close(
        out,
        want,
        c.TOL_LAYER,
        rule=f"position-wise FFN fc2({conventions.activation}(fc1 x)) (float32 vs float64)",
        hints=bugs,
        again=lambda: _observed_ffn(run_feed_forward, other(case, *SECOND_FFN), conventions),
        context=f"d_model={d}, d_ff={d_ff}, declared activation={conventions.activation!r}",
    )


# --- LayerNorm ---------------------------------------------------------------------------------------------
def _norm_case(seed: int, d: int, scale: float = 2.0, shift: float = 0.5):
    g = c.generator(300 + seed)
    return d, c.norm_weights(g, d), c.randn(g, 2, 5, d) * scale + shift


def _observed_norm(run_layer_norm, case, conv):
    d, w, x = case
    out = run_layer_norm(d_model=d, **dict(zip(("weights", "in_features"), c.fresh(w, x))))
    return out, KNOWN_BUGS.thunks("encdec.layernorm", x, w["weight"], w["bias"], conv)


# Second inputs at the scale of freshly initialised embeddings (std 0.02, as
# GPT-2 and the annotated notes initialise them): there eps 1e-5 inside the
# root and 1e-6 outside it differ, so the annotated norm and torch.var's
# unbiased variance (alike on inputs of std 2) are told apart.
SECOND_NORM = (_norm_case(7, 12, scale=0.02, shift=0.01), _norm_case(8, 24, scale=0.02, shift=-0.01))


@pytest.mark.spec("encdec.layernorm")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("d", [8, 16, 32])
def test_layer_norm(run_layer_norm, conventions, seed, d):  # noqa: F811
    """gain · (x − mean) / sqrt(var + 1e-5) + bias, biased variance (or the declared annotated variant)."""
    case = _norm_case(seed, d)
    _, w, x = case
    out, bugs = _observed_norm(run_layer_norm, case, conventions)
    assert_shape(out, (2, 5, d), rule="LayerNorm output is (..., d_model)")
    assert_close(
        out,
        o.layer_norm(x, w["weight"], w["bias"], conventions.layer_norm),
        c.TOL_FORMULA,
        rule=f"LayerNorm ({conventions.layer_norm!r} variant, float32 vs float64)",
        hints=bugs,
        again=lambda: _observed_norm(run_layer_norm, other(case, *SECOND_NORM), conventions),
        context=f"d_model={d}, x{tuple(x.shape)}",
    )


# --- positions ---------------------------------------------------------------------------------------------
def _observed_positions(run_sinusoidal_positions, case):
    max_len, d = case
    out = torch.as_tensor(run_sinusoidal_positions(max_len=max_len, d_model=d)).detach().cpu()
    if out.dim() == 3 and out.shape[0] == 1:
        out = out[0]  # a (1, max_len, d) buffer, as the annotated notes keep it
    return out, KNOWN_BUGS.thunks("encdec.positions", max_len, d)


SECOND_POSITIONS = ((40, 24), (30, 12))


@pytest.mark.spec("encdec.positions")
@pytest.mark.parametrize(("max_len", "d"), [(50, 16), (20, 32), (64, 8)])
def test_sinusoidal_positions(run_sinusoidal_positions, max_len, d):
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    out, bugs = _observed_positions(run_sinusoidal_positions, (max_len, d))
    assert_shape(out, (max_len, d), rule="positions are (max_len, d_model)")
    assert_close(
        out,
        o.positions(max_len, d),
        c.TOL_FORMULA,
        rule="sinusoidal positions (float64 formula)",
        hints=bugs,
        again=lambda: _observed_positions(run_sinusoidal_positions, other((max_len, d), *SECOND_POSITIONS)),
        context=f"max_len={max_len}, d_model={d}",
    )
