"""SPEC §6.2 attention and multi-head attention.

Attention: softmax(Q Kᵀ / √d_k) V with a boolean mask (True = may attend)
broadcasting against the scores, queries and keys of different lengths
(n ≠ m). Oracle: float64 formula. Properties: masked keys have weight
exactly 0; one allowed key per row returns its value. Rows whose keys are
all masked follow the declared ``masked_row`` (STRICT).

Multi-head attention: q/k/v/out projections with biases (none when the
implementation declares ``attention_bias=False``, the paper's), heads contiguous
blocks of d_model / h, separate query, key and value inputs. Oracle:
torch.nn.MultiheadAttention in float64 with in_proj_weight = Q, K, V stacked.
"""

import pytest
import torch

from lmspec.conformance import hints, near
from lmspec.conformance.asserts import assert_close, assert_shape
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import conventions, without_attention_bias  # noqa: F401  (fixture)
from lmspec.conformance.encdec.known_bugs import KNOWN_BUGS
from lmspec.conformance.encdec.parts import swaps
from lmspec.conformance.hints import other

SEEDS = [0, 1, 2]
strict = pytest.mark.strict


def _attention_case(seed: int, lead: tuple[int, ...] = (2,), n: int = 5, m: int = 7, d: int = 8):
    g = c.generator(seed)
    q, k, v = c.randn(g, *lead, n, d), c.randn(g, *lead, m, d), c.randn(g, *lead, m, d)
    lengths = [m - (r % 3) for r in range(lead[0])]  # padding at the end of some rows
    mask = c.source_mask(c.tokens(g, lengths, m, 11))  # (batch, 1, m)
    mask = mask.view(lead[0], *([1] * (len(lead) - 1)), 1, m)
    return q, k, v, mask


def _causal_case(seed: int, n: int = 6, d: int = 8):
    g = c.generator(seed)
    q, k, v = (c.randn(g, 2, n, d) for _ in range(3))
    return q, k, v, c.target_mask(c.tokens(g, [n, n - 2], n, 11, start=True))


def _observed(run_attention, case):
    """The implementation's attention on ``case`` (Q, K, V, mask or None), and
    the known bugs' replays there."""
    q, k, v, mask = case
    out = run_attention(*c.fresh(q, k, v)) if mask is None else run_attention(*c.fresh(q, k, v, mask))
    return out, KNOWN_BUGS.thunks("encdec.attention", q, k, v, mask)


# Second inputs: other lengths and d_k, rows with and without padding (an
# inverted mask and an ignored one differ), d_k > 1 (the scalings differ).
SECOND_PADDED = (_attention_case(10, n=4, m=6, d=16), _attention_case(11, n=6, m=4, d=16))
SECOND_CAUSAL = (_causal_case(10, n=7, d=16), _causal_case(11, n=5, d=16))
SECOND_UNMASKED = tuple((q, k, v, None) for q, k, v, _ in SECOND_PADDED)


@pytest.mark.spec("encdec.attention")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("n", "m"), [(5, 7), (6, 3)])
def test_attention_n_ne_m(run_attention, seed, n, m):
    """Decoder queries over encoder keys (n ≠ m) under a padding mask (batch, 1, m)."""
    case = _attention_case(seed, n=n, m=m)
    q, k, v, mask = case
    out, bugs = _observed(run_attention, case)
    assert_shape(out, (2, n, 8), rule="attention output is (batch, n, d_v)")
    assert_close(
        out,
        o.attention(q, k, v, mask),
        c.TOL_LAYER,
        rule="softmax(Q Kᵀ / √d_k, masked) V (float32 vs float64)",
        hints=bugs,
        near=(near.scale, near.positions(-2, "query")),
        again=lambda: _observed(run_attention, other(case, *SECOND_PADDED)),
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} mask{tuple(mask.shape)}",
    )


@pytest.mark.spec("encdec.attention")
@pytest.mark.parametrize("seed", SEEDS)
def test_attention_causal_mask(run_attention, seed):
    """A (batch, n, n) target mask (padding AND causal)."""
    case = _causal_case(seed)
    q, k, v, mask = case
    out, bugs = _observed(run_attention, case)
    assert_close(
        out,
        o.attention(q, k, v, mask),
        c.TOL_LAYER,
        rule="attention under the target mask (float32 vs float64)",
        hints=bugs,
        near=(near.scale, near.positions(-2, "query")),
        again=lambda: _observed(run_attention, other(case, *SECOND_CAUSAL)),
        context=f"Q{tuple(q.shape)}, mask {mask.int().tolist()}",
    )


@pytest.mark.spec("encdec.attention")
@pytest.mark.parametrize("seed", SEEDS)
def test_attention_without_mask(run_attention, seed):
    case = (*_attention_case(seed)[:3], None)
    q, k, v, _ = case
    out, bugs = _observed(run_attention, case)
    assert_close(
        out,
        o.attention(q, k, v),
        c.TOL_LAYER,
        rule="attention without a mask (float32 vs float64)",
        hints=bugs,
        near=(near.scale, near.positions(-2, "query")),
        again=lambda: _observed(run_attention, other(case, *SECOND_UNMASKED)),
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


def _fully_masked_case(seed: int, row: tuple[int, int]):
    """Attention inputs whose query ``row`` (batch, position) has every key masked."""
    q, k, v, _ = _attention_case(seed)
    mask = torch.ones(2, 5, 7, dtype=torch.bool)
    mask[row] = False
    return q, k, v, mask, row


def _observed_row(run_attention, case):
    """The implementation's output on ``case``, its fully masked row, and the
    replays of that row."""
    q, k, v, mask, row = case
    out = torch.as_tensor(run_attention(*c.fresh(q, k, v, mask))).detach().cpu().double()
    bugs = KNOWN_BUGS.thunks("encdec.attention/masked_row", q, k, v, mask)
    return out, out[row], [(cause, lambda f=f: f()[row]) for cause, f in bugs]


SECOND_FULLY_MASKED = _fully_masked_case(1, (1, 4))


@pytest.mark.spec("encdec.attention")
@strict
def test_attention_fully_masked_row_as_declared(run_attention, conventions):  # noqa: F811
    """STRICT: a query whose keys are all masked gets uniform weights (a large
    negative fill, declared "uniform") or NaN (a −∞ fill, declared "nan")."""
    case = _fully_masked_case(0, (0, 2))
    q, k, v, mask, _ = case
    out, row, bugs = _observed_row(run_attention, case)
    if conventions.masked_row == "uniform":
        assert_close(
            row,
            o.f64(v[0]).mean(0),
            c.TOL_LAYER,
            rule="a fully masked row gets uniform weights (declared masked_row='uniform', the default)",
            hints=bugs,
            again=lambda: _observed_row(run_attention, SECOND_FULLY_MASKED)[1:],
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


def _cross_case(seed: int, d: int, h: int):
    w, x, memory, mask = _mha_case(seed, d, h)
    return d, h, w, x, memory, memory, mask


def _separate_case(seed: int, d: int = 16, h: int = 4):
    w, x, memory, mask = _mha_case(seed, d, h)
    return d, h, w, x, memory, c.randn(c.generator(seed + 7), *memory.shape), mask


def _self_case(seed: int, d: int = 16, h: int = 4):
    w, x, _, _ = _mha_case(seed, d, h)
    return d, h, w, x, x, x, c.target_mask(c.tokens(c.generator(seed), [5, 3], 5, 11, start=True))


def _given(case, conv):
    """``case`` (d_model, heads, weights, ...) with the weights the
    implementation is given (no attention biases when it declares none)."""
    d, h, w, *rest = case
    return (d, h, without_attention_bias(w, conv), *rest)


def _observed_mha(run_multihead_attention, case, conv, impl=None):
    """The implementation's output on ``case`` (d_model, heads, weights, query,
    key, value, mask), the known bugs' replays there and (given ``impl``) the
    oracle's MHA with the implementation's attention swapped in."""
    case = _given(case, conv)
    d, h, *inputs = case
    names = ("weights", "query", "key", "value", "mask")
    out = run_multihead_attention(d_model=d, num_heads=h, **dict(zip(names, c.fresh(*inputs))))
    bugs = KNOWN_BUGS.thunks("encdec.mha", *case)
    if impl is None:
        return out, bugs
    composite = lambda **kw: o.mha_formula(*case, **kw)
    return out, bugs + hints.part_hints(swaps(impl, "encdec.mha", composite), lambda: o.mha(*case), c.TOL_LAYER)


# Second inputs: d_model 24 with 3 heads (d_k = 8, d_k² ≠ d_model: scaling by
# 1/d_k and by 1/sqrt(d_model) differ; more than one head: interleaved and
# contiguous heads differ), then 12 with 2.
SECOND_CROSS = (_cross_case(5, 24, 3), _cross_case(6, 12, 2))
SECOND_SEPARATE = (_separate_case(5, 24, 3), _separate_case(6, 12, 2))
SECOND_SELF = (_self_case(5, 24, 3), _self_case(6, 12, 2))


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("d", "h"), [(16, 4), (12, 2), (8, 1)])
def test_mha_cross_attention(run_multihead_attention, impl, conventions, seed, d, h):  # noqa: F811
    """Queries from the decoder (n = 5), keys and values from the encoder
    (m = 7), the source padding mask (batch, 1, m)."""
    case = _given(_cross_case(seed, d, h), conventions)
    _, _, w, x, memory, _, mask = case
    out, bugs = _observed_mha(run_multihead_attention, case, conventions, impl)
    assert_shape(out, (2, 5, d), rule="multi-head attention output is (batch, n, d_model)")
    assert_close(
        out,
        o.mha(d, h, w, x, memory, memory, mask),
        c.TOL_LAYER,
        rule="multi-head cross-attention vs torch.nn.MultiheadAttention (float64)",
        hints=bugs,
        near=(near.scale, near.positions(-2, "query")),
        again=lambda: _observed_mha(run_multihead_attention, other(case, *SECOND_CROSS), conventions, impl),
        context=f"d_model={d}, heads={h}, query{tuple(x.shape)}, key/value{tuple(memory.shape)}",
    )


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
def test_mha_separate_key_and_value(run_multihead_attention, impl, conventions, seed):  # noqa: F811
    """Three different inputs: query, key and value are each projected by their own weights."""
    case = _given(_separate_case(seed), conventions)
    out, bugs = _observed_mha(run_multihead_attention, case, conventions, impl)
    assert_close(
        out,
        o.mha(*case),
        c.TOL_LAYER,
        rule="multi-head attention with query, key and value all different",
        hints=bugs,
        near=(near.scale, near.positions(-2, "query")),
        again=lambda: _observed_mha(run_multihead_attention, other(case, *SECOND_SEPARATE), conventions, impl),
    )


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
def test_mha_self_attention_target_mask(run_multihead_attention, impl, conventions, seed):  # noqa: F811
    """Self-attention under a (batch, n, n) target mask, shared by every head."""
    case = _given(_self_case(seed), conventions)
    out, bugs = _observed_mha(run_multihead_attention, case, conventions, impl)
    assert_close(
        out,
        o.mha(*case),
        c.TOL_LAYER,
        rule="masked multi-head self-attention vs torch.nn.MultiheadAttention (float64)",
        hints=bugs,
        near=(near.scale, near.positions(-2, "query")),
        again=lambda: _observed_mha(run_multihead_attention, other(case, *SECOND_SELF), conventions, impl),
    )


@pytest.mark.spec("encdec.mha")
@pytest.mark.parametrize("seed", SEEDS)
def test_mha_without_mask(run_multihead_attention, conventions, seed):  # noqa: F811
    w, x, memory, _ = _mha_case(seed)
    w = without_attention_bias(w, conventions)
    out = run_multihead_attention(
        d_model=16, num_heads=4, **dict(zip(("weights", "query", "key", "value"), c.fresh(w, x, memory, memory)))
    )
    assert_close(out, o.mha(16, 4, w, x, memory, memory), c.TOL_LAYER, rule="multi-head attention, mask=None")
