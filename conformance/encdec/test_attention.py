"""SPEC §6.2 attention and multi-head attention.

Attention: softmax(Q Kᵀ / √d_k) V with a boolean mask (True = may attend)
broadcasting against the scores, queries and keys of different lengths
(n ≠ m). Oracle: float64 formula. Properties: masked keys have weight
exactly 0; one allowed key per row returns its value. Rows whose keys are
all masked follow the declared ``masked_row`` (STRICT).

Multi-head attention: q/k/v/out projections with biases, heads contiguous
blocks of d_model / h, separate query, key and value inputs. Oracle:
torch.nn.MultiheadAttention in float64 with in_proj_weight = Q, K, V stacked.
"""

import math

import pytest
import torch

from lmspec.conformance.asserts import assert_close, assert_shape
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import conventions  # noqa: F401  (fixture)

SEEDS = [0, 1, 2]
strict = pytest.mark.strict


def _attention_case(seed: int, lead: tuple[int, ...] = (2,), n: int = 5, m: int = 7, d: int = 8):
    g = c.generator(seed)
    q, k, v = c.randn(g, *lead, n, d), c.randn(g, *lead, m, d), c.randn(g, *lead, m, d)
    lengths = [m - (r % 3) for r in range(lead[0])]  # padding at the end of some rows
    mask = c.source_mask(c.tokens(g, lengths, m, 11))  # (batch, 1, m)
    mask = mask.view(lead[0], *([1] * (len(lead) - 1)), 1, m)
    return q, k, v, mask


def _attention_hints(q, k, v, mask):
    return [
        ("mask polarity inverted (True must mean 'may attend')", lambda: o.attention(q, k, v, ~mask)),
        ("missing 1/sqrt(d_k) scaling", lambda: o.attention(q, k, v, mask, scale=1.0)),
        ("scaled by 1/d_k instead of 1/sqrt(d_k)", lambda: o.attention(q, k, v, mask, scale=1.0 / q.shape[-1])),
        ("mask ignored", lambda: o.attention(q, k, v)),
    ]


@pytest.mark.spec("encdec.attention")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("n", "m"), [(5, 7), (6, 3)])
def test_attention_n_ne_m(run_attention, seed, n, m):
    """Decoder queries over encoder keys (n ≠ m) under a padding mask (batch, 1, m)."""
    q, k, v, mask = _attention_case(seed, n=n, m=m)
    out = run_attention(*c.fresh(q, k, v, mask))
    assert_shape(out, (2, n, 8), rule="attention output is (batch, n, d_v)")
    assert_close(
        out,
        o.attention(q, k, v, mask),
        c.TOL_LAYER,
        rule="softmax(Q Kᵀ / √d_k, masked) V (float32 vs float64)",
        hints=_attention_hints(q, k, v, mask),
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} mask{tuple(mask.shape)}",
    )


@pytest.mark.spec("encdec.attention")
@pytest.mark.parametrize("seed", SEEDS)
def test_attention_causal_mask(run_attention, seed):
    """A (batch, n, n) target mask (padding AND causal)."""
    g = c.generator(seed)
    q, k, v = (c.randn(g, 2, 6, 8) for _ in range(3))
    mask = c.target_mask(c.tokens(g, [6, 4], 6, 11, start=True))
    assert_close(
        run_attention(*c.fresh(q, k, v, mask)),
        o.attention(q, k, v, mask),
        c.TOL_LAYER,
        rule="attention under the target mask (float32 vs float64)",
        hints=_attention_hints(q, k, v, mask),
        context=f"Q{tuple(q.shape)}, mask {mask.int().tolist()}",
    )


@pytest.mark.spec("encdec.attention")
@pytest.mark.parametrize("seed", SEEDS)
def test_attention_without_mask(run_attention, seed):
    q, k, v, _ = _attention_case(seed)
    assert_close(
        run_attention(*c.fresh(q, k, v)),
        o.attention(q, k, v),
        c.TOL_LAYER,
        rule="attention without a mask (float32 vs float64)",
        hints=[("missing 1/sqrt(d_k) scaling", lambda: o.attention(q, k, v, scale=1.0))],
    )


@pytest.mark.spec("encdec.attention")
@pytest.mark.parametrize("seed", SEEDS)
def test_attention_masked_keys_have_zero_weight(run_attention, seed):
    """Adding 1e4 to the value row of a masked key changes nothing."""
    q, k, v, mask = _attention_case(seed)
    j = 6  # masked in rows 1 (and every row whose length is < 7)
    bumped = v.clone()
    bumped[..., j, :] += 1e4
    base = torch.as_tensor(run_attention(*c.fresh(q, k, v, mask))).detach().cpu()
    out = torch.as_tensor(run_attention(*c.fresh(q, k, bumped, mask))).detach().cpu()
    blind = ~mask[:, 0, j]
    assert bool(blind.any())
    assert_close(
        out[blind],
        base[blind],
        c.TOL_LAYER,
        rule=f"masked key {j} has weight exactly 0 (its value row must not matter)",
        context=f"mask {mask.int().tolist()}",
    )


@pytest.mark.spec("encdec.attention")
@strict
@pytest.mark.parametrize("seed", SEEDS)
def test_attention_heads_axis(run_attention, seed):
    """STRICT: any number of leading axes, (batch, heads, n, d) with a (batch, 1, 1, m) mask."""
    q, k, v, mask = _attention_case(seed, lead=(2, 3))
    assert_close(
        run_attention(*c.fresh(q, k, v, mask)),
        o.attention(q, k, v, mask),
        c.TOL_LAYER,
        rule="attention over (batch, heads, n, d)",
    )


@pytest.mark.spec("encdec.attention")
@strict
def test_attention_fully_masked_row_as_declared(run_attention, conventions):  # noqa: F811
    """STRICT: a query whose keys are all masked gets uniform weights (a large
    negative fill, declared "uniform") or NaN (a −∞ fill, declared "nan")."""
    q, k, v, _ = _attention_case(0)
    mask = torch.ones(2, 5, 7, dtype=torch.bool)
    mask[0, 2] = False
    out = torch.as_tensor(run_attention(*c.fresh(q, k, v, mask))).detach().cpu().double()
    row = out[0, 2]
    if conventions.masked_row == "uniform":
        assert_close(
            row,
            o.f64(v[0]).mean(0),
            c.TOL_LAYER,
            rule="a fully masked row gets uniform weights (declared masked_row='uniform', the default)",
            hints=[("NaN for a fully masked row: declare masked_row='nan'", lambda: torch.full_like(row, math.nan))],
        )
    else:
        assert bool(row.isnan().all()), f"declared masked_row='nan' but the fully masked row is {row.tolist()}"
    others = torch.ones(2, 5, dtype=torch.bool)
    others[0, 2] = False
    assert_close(out[others], o.attention(q, k, v, mask)[others], c.TOL_LAYER, rule="the other rows are unaffected")


# --- multi-head attention -------------------------------------------------------------------------------
def _mha_case(seed: int, d: int = 16, h: int = 4, n: int = 5, m: int = 7):
    g = c.generator(100 + seed)
    w = c.mha_weights(g, d)
    x, memory = c.randn(g, 2, n, d), c.randn(g, 2, m, d)
    mask = c.source_mask(c.tokens(g, [m, m - 2], m, 11))
    return w, x, memory, mask


def _mha_hints(d, h, w, query, key, value, mask):
    no_bias = {k: (torch.zeros_like(t) if k.endswith("bias") else t) for k, t in w.items()}
    return [
        ("biases ignored", lambda: o.mha(d, h, no_bias, query, key, value, mask)),
        ("keys and values from the query input", lambda: o.mha(d, h, w, query, query, query, None)),
        ("mask polarity inverted", lambda: o.mha(d, h, w, query, key, value, ~mask)),
        ("mask ignored", lambda: o.mha(d, h, w, query, key, value, None)),
    ]


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("d", "h"), [(16, 4), (12, 2), (8, 1)])
def test_mha_cross_attention(run_multihead_attention, seed, d, h):
    """Queries from the decoder (n = 5), keys and values from the encoder
    (m = 7), the source padding mask (batch, 1, m)."""
    w, x, memory, mask = _mha_case(seed, d, h)
    out = run_multihead_attention(
        d_model=d,
        num_heads=h,
        **dict(zip(("weights", "query", "key", "value", "mask"), c.fresh(w, x, memory, memory, mask))),
    )
    assert_shape(out, (2, 5, d), rule="multi-head attention output is (batch, n, d_model)")
    assert_close(
        out,
        o.mha(d, h, w, x, memory, memory, mask),
        c.TOL_LAYER,
        rule="multi-head cross-attention vs torch.nn.MultiheadAttention (float64)",
        hints=_mha_hints(d, h, w, x, memory, memory, mask),
        context=f"d_model={d}, heads={h}, query{tuple(x.shape)}, key/value{tuple(memory.shape)}",
    )


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
def test_mha_separate_key_and_value(run_multihead_attention, seed):
    """Three different inputs: query, key and value are each projected by their own weights."""
    w, x, memory, mask = _mha_case(seed)
    value = c.randn(c.generator(seed + 7), *memory.shape)
    out = run_multihead_attention(
        d_model=16,
        num_heads=4,
        **dict(zip(("weights", "query", "key", "value", "mask"), c.fresh(w, x, memory, value, mask))),
    )
    assert_close(
        out,
        o.mha(16, 4, w, x, memory, value, mask),
        c.TOL_LAYER,
        rule="multi-head attention with query, key and value all different",
        hints=[
            ("values taken from the key input", lambda: o.mha(16, 4, w, x, memory, memory, mask)),
            *_mha_hints(16, 4, w, x, memory, value, mask),
        ],
    )


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
def test_mha_self_attention_target_mask(run_multihead_attention, seed):
    """Self-attention under a (batch, n, n) target mask, shared by every head."""
    w, x, _, _ = _mha_case(seed)
    mask = c.target_mask(c.tokens(c.generator(seed), [5, 3], 5, 11, start=True))
    out = run_multihead_attention(
        d_model=16, num_heads=4, **dict(zip(("weights", "query", "key", "value", "mask"), c.fresh(w, x, x, x, mask)))
    )
    assert_close(
        out,
        o.mha(16, 4, w, x, x, x, mask),
        c.TOL_LAYER,
        rule="masked multi-head self-attention vs torch.nn.MultiheadAttention (float64)",
        hints=_mha_hints(16, 4, w, x, x, x, mask),
    )


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
def test_mha_without_mask(run_multihead_attention, seed):
    w, x, memory, _ = _mha_case(seed)
    out = run_multihead_attention(
        d_model=16, num_heads=4, **dict(zip(("weights", "query", "key", "value"), c.fresh(w, x, memory, memory)))
    )
    assert_close(out, o.mha(16, 4, w, x, memory, memory), c.TOL_LAYER, rule="multi-head attention, mask=None")
