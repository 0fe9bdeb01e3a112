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

SEEDS = [0, 1, 2]


# --- FFN -----------------------------------------------------------------------------------------------
def _ffn_hints(w, x, conv):
    f = {k: o.f64(t) for k, t in w.items()}
    x64 = o.f64(x)
    lin1 = lambda t: t @ f["fc1.weight"].T + f["fc1.bias"]
    lin2 = lambda t: t @ f["fc2.weight"].T + f["fc2.bias"]
    hints = [
        ("ReLU after fc2 instead of between fc1 and fc2", lambda: torch.relu(lin2(lin1(x64)))),
        ("ReLU before fc1 instead of between fc1 and fc2", lambda: lin2(lin1(torch.relu(x64)))),
        ("biases ignored", lambda: torch.relu(x64 @ f["fc1.weight"].T) @ f["fc2.weight"].T),
    ]
    for why, alt in conv.alternatives("activation"):
        hints.append((why, lambda alt=alt: o.feed_forward(w, x, alt.activation)))
    return hints


@pytest.mark.spec("encdec.ffn")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("d", "d_ff"), [(16, 64), (8, 32)])
def test_feed_forward(run_feed_forward, conventions, seed, d, d_ff):  # noqa: F811
    """fc2(act(fc1(x))) with biases, act as declared (ReLU by default)."""
    g = c.generator(200 + seed)
    w, x = c.ffn_weights(g, d, d_ff), c.randn(g, 2, 5, d)
    out = run_feed_forward(d_model=d, d_ff=d_ff, **dict(zip(("weights", "in_features"), c.fresh(w, x))))
    assert_shape(out, (2, 5, d), rule="FFN output is (..., d_model)")
    want = expected(conventions, lambda conv: o.feed_forward(w, x, conv.activation), out, c.TOL_LAYER)
    assert_close(
        out,
        want,
        c.TOL_LAYER,
        rule=f"position-wise FFN fc2({conventions.activation}(fc1 x)) (float32 vs float64)",
        hints=_ffn_hints(w, x, conventions),
        context=f"d_model={d}, d_ff={d_ff}, declared activation={conventions.activation!r}",
    )


# --- LayerNorm ---------------------------------------------------------------------------------------------
@pytest.mark.spec("encdec.layernorm")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("d", [8, 16, 32])
def test_layer_norm(run_layer_norm, conventions, seed, d):  # noqa: F811
    """gain · (x − mean) / sqrt(var + 1e-5) + bias, biased variance (or the declared annotated variant)."""
    g = c.generator(300 + seed)
    w = c.norm_weights(g, d)
    x = c.randn(g, 2, 5, d) * 2.0 + 0.5
    out = run_layer_norm(d_model=d, **dict(zip(("weights", "in_features"), c.fresh(w, x))))
    assert_shape(out, (2, 5, d), rule="LayerNorm output is (..., d_model)")
    hints = [
        (why, lambda alt=alt: o.layer_norm(x, w["weight"], w["bias"], alt.layer_norm))
        for why, alt in conventions.alternatives("layer_norm")
    ]
    eps = 1e-5 if conventions.layer_norm == "biased" else 1e-6
    hints += [
        ("gain and bias ignored", lambda: o.layer_norm(x, torch.ones(d), torch.zeros(d), conventions.layer_norm)),
        (
            "unbiased variance inside the root (torch.var's default): the paper's norm uses the biased one",
            lambda: (
                o.f64(w["weight"])
                * (o.f64(x) - o.f64(x).mean(-1, keepdim=True))
                / torch.sqrt(o.f64(x).var(-1, keepdim=True) + eps)
                + o.f64(w["bias"])
            ),
        ),
    ]
    assert_close(
        out,
        o.layer_norm(x, w["weight"], w["bias"], conventions.layer_norm),
        c.TOL_FORMULA,
        rule=f"LayerNorm ({conventions.layer_norm!r} variant, float32 vs float64)",
        hints=hints,
        context=f"d_model={d}, x{tuple(x.shape)}",
    )


# --- positions ---------------------------------------------------------------------------------------------
@pytest.mark.spec("encdec.positions")
@pytest.mark.parametrize(("max_len", "d"), [(50, 16), (20, 32), (64, 8)])
def test_sinusoidal_positions(run_sinusoidal_positions, max_len, d):
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    out = run_sinusoidal_positions(max_len=max_len, d_model=d)
    out = torch.as_tensor(out).detach().cpu()
    if out.dim() == 3 and out.shape[0] == 1:
        out = out[0]  # a (1, max_len, d) buffer, as the annotated notes keep it
    assert_shape(out, (max_len, d), rule="positions are (max_len, d_model)")
    assert_close(
        out,
        o.positions(max_len, d),
        c.TOL_FORMULA,
        rule="sinusoidal positions (float64 formula)",
        hints=[
            ("sin and cos swapped (cos on even columns)", lambda: o.positions(max_len, d, swap=True)),
            ("not interleaved (all sines, then all cosines)", lambda: o.positions(max_len, d, halves=True)),
        ],
        context=f"max_len={max_len}, d_model={d}",
    )
