"""SPEC §2 scaled dot-product attention and causal multi-head self-attention.

Oracles: F.scaled_dot_product_attention in float64 (SDPA) and an explicit
float64 loop over heads (MHA, conformance/cs336/oracles/nn.py). Properties: masked
keys have weight exactly 0, rows are normalised, True means "may attend",
causality, RoPE on Q and K only (so a common position shift changes nothing).

MUST tests use the contract (SPEC §2): float32 Q/K/V of shape (batch, n, d) or
(batch, heads, n, d) with a mask of the scores' full shape, an (n, m) mask or
no mask; MHA on (batch, seq, d_model) with token_positions (1, seq) or
(batch, seq). Other ranks and mask/position broadcasts, bfloat16 attention and
MHA with RoPE without token_positions are STRICT tests.
"""

from typing import NamedTuple

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from lmspec.conformance import hints, near
from lmspec.conformance import tolerances as tol
from lmspec.conformance.asserts import assert_close, assert_shape, describe_mismatch
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.oracles.nn_bugs import KNOWN_BUGS
from lmspec.conformance.cs336.parts import ImplParts, swaps
from lmspec.conformance.cs336.strategies import nn as sn

TOL_SDPA = {torch.float32: tol.SDPA_F32, torch.bfloat16: tol.SDPA_BF16}
strict = pytest.mark.strict
SDPA_CONTRACT = sn.sdpa_cases(lead_dims=sn.BATCH_OR_HEADS, contract_masks=True)
MHA_CONTRACT = sn.mha_cases(lead_dims=sn.BATCH, contract_positions=True)


def _pinned_sdpa(seed: int, lead: tuple[int, ...], n: int, m: int, d_k: int, d_v: int, mask_lead) -> sn.SDPACase:
    g = sn.generator(seed)
    q, k, v = sn.randn(g, *lead, n, d_k), sn.randn(g, *lead, m, d_k), sn.randn(g, *lead, m, d_v)
    return sn.SDPACase(q, k, v, sn.two_sided_mask(g, (*mask_lead, n, m)))


# The SDPA tests' second inputs (a likely cause is named only when it also
# reproduces the output there; the other one when the failing input is one):
# (batch, n, d) with a full mask and (batch, heads, n, d) with an (n, m) mask,
# 4-6 queries and keys, d_k 8 and 4 (1, 1/√d_k and 1/d_k scales all differ).
SECOND_SDPA = (_pinned_sdpa(3, (2,), 5, 6, 8, 4, (2,)), _pinned_sdpa(4, (2, 2), 4, 5, 4, 3, ()))


def _masked_key(case: sn.SDPACase) -> int:
    """The first key that some query may not see."""
    return int((~case.mask).flatten(0, -2).any(0).nonzero()[0])


def _pinned_mha(seed: int, heads: int, d_k: int, positions: torch.Tensor, max_seq_len: int) -> sn.MHACase:
    """``(batch, seq)`` = ``positions.shape``, RoPE θ = 10000."""
    g = sn.generator(seed)
    d_model = heads * d_k
    x = sn.randn(g, *positions.shape, d_model)
    q_w, k_w, v_w, o_w = (sn.weight(g, d_model, d_model) for _ in range(4))
    return sn.MHACase(x, q_w, k_w, v_w, o_w, heads, 10000.0, max_seq_len, positions)


# Pinned trap: 2 heads of d_k = 4, 3 tokens, so head layout, RoPE pairing and
# masking bugs all show (with a hint) before any shrinking.
TWO_HEADS = _pinned_mha(1, 2, 4, torch.tensor([[2, 5, 9]]), 16)
# batch = heads = 2 with different positions per sequence: positions that are
# not broadcast over the head axis go wrong silently here (no shape error).
TWO_HEADS_TWO_SEQUENCES = TWO_HEADS._replace(
    x=torch.cat([TWO_HEADS.x, sn.randn(sn.generator(2), 1, 3, 8)]), positions=torch.tensor([[2, 5, 9], [0, 1, 3]])
)


# The MHA tests' second inputs: batch = heads (2 and 3) with (batch, seq)
# positions, distinct per sequence, so that positions not broadcast over the
# head axis go wrong silently there too; seq 5 and 4 (a causal mask's bugs
# look alike on 2 tokens: no mask and a mask shifted by one); d_k = 4 (on d_k
# = 2, half-split and interleaved RoPE pairs are the same pair).
SECOND_MHA = (
    _pinned_mha(5, 2, 4, torch.tensor([[0, 1, 2, 3, 4], [3, 4, 7, 9, 14]]), 16),
    _pinned_mha(6, 3, 4, torch.tensor([[1, 2, 5, 6], [0, 1, 2, 3], [4, 8, 9, 12]]), 16),
)
#: The shift test's second inputs: (case, shift).
SECOND_SHIFTS = ((SECOND_MHA[0], 3), (SECOND_MHA[1], 7))


def _cpu(t):
    return torch.as_tensor(t).detach().cpu()


# --- scaled dot-product attention -------------------------------------------------
def _sdpa_inputs(case, dtype):
    return tuple(t.to(dtype) if t.is_floating_point() else t for t in case)


def _sdpa_observed(run_sdpa, device, q, k, v, mask=None):
    """The implementation's attention (without a mask argument when ``mask``
    is None) and the known bugs replayed on the same inputs."""
    masks = () if mask is None else (mask.to(device),)
    return run_sdpa(q.to(device), k.to(device), v.to(device), *masks), KNOWN_BUGS.thunks("2.sdpa", q, k, v, mask)


def _sdpa_with_parts(run_sdpa, impl, device, tolerance, q, k, v, mask):
    """:func:`_sdpa_observed`, and the oracle's attention with the
    implementation's softmax swapped in (a failure its softmax explains; in
    float32, the dtype the parts are called in)."""
    out, bugs = _sdpa_observed(run_sdpa, device, q, k, v, mask)
    if q.dtype != torch.float32:
        return out, bugs

    def composite(**kw):
        return oracle.attention(q, k, v, mask, **kw)

    inside = ImplParts(impl, device).of("2.sdpa")
    return out, bugs + hints.part_hints(swaps(composite, inside), composite, tolerance)


def _check_sdpa(run_sdpa, impl, device, case, dtype):
    __tracebackhide__ = True
    q, k, v, mask = _sdpa_inputs(case, dtype)
    out, bugs = _sdpa_with_parts(run_sdpa, impl, device, TOL_SDPA[dtype], q, k, v, mask)
    assert_shape(out, (*q.shape[:-1], v.shape[-1]), rule="attention output is (..., n, d_v)")
    second = _sdpa_inputs(hints.other(case, *SECOND_SDPA), dtype)
    assert_close(
        out,
        oracle.sdpa(q, k, v, mask),
        TOL_SDPA[dtype],
        rule=f"scaled dot-product attention ({dtype} vs float64)",
        hints=bugs,
        again=lambda: _sdpa_with_parts(run_sdpa, impl, device, TOL_SDPA[dtype], *second),
        near=(near.scale, near.positions(-2, "query")),
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} V{tuple(v.shape)} mask{tuple(mask.shape)}",
    )


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT)
def test_sdpa_matches_float64(run_scaled_dot_product_attention, impl, device, case):
    """softmax(QKᵀ/√d_k, masked −inf) V on (batch, n, d) and (batch, heads, n, d),
    the mask of the scores' full shape or (n, m) broadcast, True = may attend."""
    _check_sdpa(run_scaled_dot_product_attention, impl, device, case, torch.float32)


@pytest.mark.spec("2.sdpa")
@strict
@given(case=sn.sdpa_cases())
def test_sdpa_any_leading_dims_and_mask_broadcast(run_scaled_dot_product_attention, impl, device, case):
    """STRICT: the same for any number of leading dims ((n, d) without a batch,
    5-D...) and masks broadcasting partially ((1, n, m), (heads, n, m)...)."""
    _check_sdpa(run_scaled_dot_product_attention, impl, device, case, torch.float32)


@pytest.mark.spec("2.sdpa")
@strict
@given(case=SDPA_CONTRACT)
def test_sdpa_bfloat16_matches_float64(run_scaled_dot_product_attention, impl, device, case):
    """STRICT: bfloat16 Q, K, V (the handout uses float32) give attention within
    bfloat16 accuracy of the float64 result."""
    _check_sdpa(run_scaled_dot_product_attention, impl, device, case, torch.bfloat16)


def _right_with_all_true_mask(run_sdpa, device, q, k, v) -> bool:
    """The call without a mask raises, and the same call with an all-True mask
    (every key attended: what no mask means) gives the oracle's attention."""
    try:
        run_sdpa(q.to(device), k.to(device), v.to(device))
    except Exception:
        everything = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=device)
        out = run_sdpa(q.to(device), k.to(device), v.to(device), everything)
        return describe_mismatch(out, oracle.sdpa(q, k, v), tol.SDPA_F32) is None
    return False


def _raise_if_no_mask_unhandled(run_sdpa, device, case, second, failure: Exception) -> None:
    """Where the call without a mask raised, on this input and on the second,
    and an all-True mask gives the right attention on both: a failure that names
    its cause (mask=None not handled)."""
    __tracebackhide__ = True
    if not hints.reporting():
        return
    try:
        told = _right_with_all_true_mask(run_sdpa, device, *case) and _right_with_all_true_mask(
            run_sdpa, device, *second
        )
    except hints.UNSURE:
        return
    if told:
        cause = "mask=None not handled: without a mask, attend to every key (an all-True mask gives the right result)"
        raise AssertionError(
            f"attention without a mask: the call raised {type(failure).__name__}: {str(failure)[:200].splitlines()[0]}"
            + hints.likely_causes([cause])
            + f"\n  input: Q{tuple(case[0].shape)} K{tuple(case[1].shape)} V{tuple(case[2].shape)}, no mask"
        ) from failure


#: Pinned first input of the no-mask test: an implementation that needs a mask
#: fails here before the worker stops calling it (repeated failures), so the
#: cause can be confirmed.
NO_MASK_FIRST = _pinned_sdpa(7, (2, 2), 3, 4, 4, 4, ())


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT)
@example(case=NO_MASK_FIRST)
def test_sdpa_without_mask(run_scaled_dot_product_attention, device, case):
    """mask=None (the default) attends to every key."""
    q, k, v, _ = case
    second = hints.other(case, *SECOND_SDPA)[:3]
    try:
        out, bugs = _sdpa_observed(run_scaled_dot_product_attention, device, q, k, v)
    except Exception as failure:
        _raise_if_no_mask_unhandled(run_scaled_dot_product_attention, device, (q, k, v), second, failure)
        raise
    assert_shape(out, (*q.shape[:-1], v.shape[-1]), rule="attention output is (..., n, d_v)")
    assert_close(
        out,
        oracle.sdpa(q, k, v),
        tol.SDPA_F32,
        rule="attention without a mask (float32 vs float64)",
        hints=bugs,
        again=lambda: _sdpa_observed(run_scaled_dot_product_attention, device, *second),
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} V{tuple(v.shape)}",
    )


class _BumpedKey(NamedTuple):
    out: torch.Tensor  # rows of the queries blind to the key, its value row bumped
    bugs: list  # the known bugs replayed on those rows
    base: torch.Tensor  # the same rows without the bump
    key: int


def _bumped_key(run_sdpa, device, case, key) -> _BumpedKey:
    """Attention with key ``key``'s value row raised by 1e4, on the rows of the
    queries that may not see that key, and the same without the bump."""
    q, k, v, mask = case
    j = key % k.shape[-2]
    bumped = v.clone()
    bumped[..., j, :] += 1e4
    base = _cpu(run_sdpa(q.to(device), k.to(device), v.to(device), mask.to(device)))
    out = _cpu(run_sdpa(q.to(device), k.to(device), bumped.to(device), mask.to(device)))
    blind = (~mask[..., j]).expand(base.shape[:-1])  # queries that may not see key j
    bugs = [(c, lambda f=f: f().expand(*base.shape)[blind]) for c, f in KNOWN_BUGS.thunks("2.sdpa", q, k, bumped, mask)]
    return _BumpedKey(out[blind], bugs, base[blind], j)


#: The masked-key test's second inputs: a key some query of the case may not see.
SECOND_BUMPED_KEYS = tuple((case, _masked_key(case)) for case in SECOND_SDPA)


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT, key=st.integers(0, 5))
def test_sdpa_masked_keys_have_zero_weight(run_scaled_dot_product_attention, device, case, key):
    """A key masked out for query i has weight exactly 0: adding 1e4 to its
    value row changes nothing in row i."""
    q, k, _, mask = case
    seen = _bumped_key(run_scaled_dot_product_attention, device, case, key)
    note(f"key {seen.key}; queries blind to it: {seen.out.shape[0]}")
    second = hints.other((case, key), *SECOND_BUMPED_KEYS)
    assert_close(
        seen.out,
        seen.base,
        tol.SDPA_F32,
        rule=f"masked key {seen.key} has weight exactly 0 (its value row must not matter)",
        hints=seen.bugs,
        again=lambda: _bumped_key(run_scaled_dot_product_attention, device, *second)[:2],
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} mask{tuple(mask.shape)}",
    )


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT, value=st.floats(-4, 4, allow_nan=False, width=16))
def test_sdpa_rows_are_normalised(run_scaled_dot_product_attention, device, case, value):
    """Weights of each query row sum to 1 over its allowed keys: a constant
    value row c comes out as c."""
    q, k, v, mask = case
    const = torch.full_like(v, value)
    out = run_scaled_dot_product_attention(q.to(device), k.to(device), const.to(device), mask.to(device))
    assert_close(
        out,
        torch.full((*q.shape[:-1], v.shape[-1]), value, dtype=torch.float64),
        tol.SDPA_F32,
        rule="attention weights sum to 1 over allowed keys (V = c gives c)",
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} mask{tuple(mask.shape)}, c={value}",
    )


def _one_key_each(case, seed):
    """``case`` with a mask that has exactly one True per row (drawn from ``seed``)."""
    q, k, v, _ = case
    chosen = torch.randint(0, k.shape[-2], (q.shape[-2],), generator=torch.Generator().manual_seed(seed))
    return sn.SDPACase(q, k, v, torch.nn.functional.one_hot(chosen, k.shape[-2]).bool()), chosen


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT, seed=sn.seeds)
def test_sdpa_mask_true_means_attend(run_scaled_dot_product_attention, device, case, seed):
    """With exactly one True per row, query i returns the value row of that key."""
    (q, k, v, mask), chosen = _one_key_each(case, seed)
    out, bugs = _sdpa_observed(run_scaled_dot_product_attention, device, q, k, v, mask)
    second, _ = _one_key_each(*hints.other((case, seed), *((c, 1) for c in SECOND_SDPA)))
    assert_close(
        out,
        oracle.f64(v)[..., chosen, :],
        tol.SDPA_F32,
        rule="mask True = may attend: the only allowed key gets weight 1",
        hints=bugs,
        again=lambda: _sdpa_observed(run_scaled_dot_product_attention, device, *second),
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)}, allowed key per query {chosen.tolist()}",
    )


# --- multi-head self-attention -------------------------------------------------------
def _weights(case, device):
    return [w.to(device) for w in (case.q_w, case.k_w, case.v_w, case.o_w)]


def _oracle_args(case):
    return case.x, case.q_w, case.k_w, case.v_w, case.o_w, case.num_heads


def _mha_parts(impl, device, case, **kw):
    """The oracle's MHA on ``case`` (``kw``: theta, positions) with each of the
    implementation's parts swapped in: its SDPA, and with RoPE its RoPE."""

    def composite(**swap):
        return oracle.mha(*_oracle_args(case), **kw, **swap)

    rope = kw.get("theta") is not None
    inside = ImplParts(impl, device).of("2.mha", max_seq_len=case.max_seq_len, rope=rope)
    return hints.part_hints(swaps(composite, inside), composite, tol.MHA_F32)


def _mha_observed(run_mha, impl, device, case):
    """The implementation's MHA without RoPE, the known bugs replayed on
    ``case`` and the oracle's MHA with the implementation's SDPA."""
    out = run_mha(case.x.shape[-1], case.num_heads, *_weights(case, device), case.x.to(device))
    return out, KNOWN_BUGS.thunks("2.mha", *_oracle_args(case)) + _mha_parts(impl, device, case)


def _check_mha(run_mha, impl, device, case):
    __tracebackhide__ = True
    out, bugs = _mha_observed(run_mha, impl, device, case)
    assert_shape(out, case.x.shape, rule="MHA output is (..., seq, d_model)")
    second = hints.other(case, *SECOND_MHA)
    assert_close(
        out,
        oracle.mha(*_oracle_args(case)),
        tol.MHA_F32,
        rule="causal multi-head self-attention (float32 vs float64 per-head loop)",
        hints=bugs,
        again=lambda: _mha_observed(run_mha, impl, device, second),
        near=(near.scale, near.positions(-2)),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}",
    )


@pytest.mark.spec("2.mha")
@given(case=MHA_CONTRACT)
@example(case=TWO_HEADS)
def test_mha_matches_float64_per_head_loop(run_multihead_self_attention, impl, device, case):
    """Causal MHA without RoPE on (batch, seq, d_model): heads grouped head by
    head, concatenated in order."""
    _check_mha(run_multihead_self_attention, impl, device, case)


@pytest.mark.spec("2.mha")
@strict
@given(case=sn.mha_cases())
def test_mha_any_leading_dims(run_multihead_self_attention, impl, device, case):
    """STRICT: MHA works for any number of leading dims, none included (a
    (seq, d_model) input)."""
    _check_mha(run_multihead_self_attention, impl, device, case)


def _run_mha_rope(run, case, device, positions, max_seq_len=None):
    return run(
        case.x.shape[-1],
        case.num_heads,
        case.max_seq_len if max_seq_len is None else max_seq_len,
        case.theta,
        *_weights(case, device),
        case.x.to(device),
        token_positions=positions.to(device),
    )


def _mha_rope_observed(run, device, case, shift=0, *, default_positions=False):
    """The implementation's MHA with RoPE at the case's positions + ``shift``
    (``default_positions``: token_positions omitted, 0..seq-1), and the known
    bugs replayed there."""
    if default_positions:
        w = _weights(case, device)
        out = run(case.x.shape[-1], case.num_heads, case.max_seq_len, case.theta, *w, case.x.to(device))
        return out, KNOWN_BUGS.thunks("2.mha", *_oracle_args(case), theta=case.theta)
    positions = case.positions + shift
    out = _run_mha_rope(run, case, device, positions, case.max_seq_len + shift)
    return out, KNOWN_BUGS.thunks("2.mha", *_oracle_args(case), theta=case.theta, positions=positions)


def _mha_rope_with_parts(run, impl, device, case):
    """:func:`_mha_rope_observed`, and the oracle's MHA with each of the
    implementation's parts swapped in."""
    out, bugs = _mha_rope_observed(run, device, case)
    return out, bugs + _mha_parts(impl, device, case, theta=case.theta, positions=case.positions)


def _check_mha_rope(run, impl, device, case):
    __tracebackhide__ = True
    out, bugs = _mha_rope_with_parts(run, impl, device, case)
    assert_shape(out, case.x.shape, rule="MHA output is (..., seq, d_model)")
    second = hints.other(case, *SECOND_MHA)
    assert_close(
        out,
        oracle.mha(*_oracle_args(case), theta=case.theta, positions=case.positions),
        tol.MHA_F32,
        rule="causal MHA with RoPE (float32 vs float64 per-head loop)",
        hints=bugs,
        again=lambda: _mha_rope_with_parts(run, impl, device, second),
        near=(near.scale, near.positions(-2)),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, pos {case.positions.tolist()}",
    )


@pytest.mark.spec("2.mha")
@given(case=MHA_CONTRACT)
@example(case=TWO_HEADS)
@example(case=TWO_HEADS_TWO_SEQUENCES)
def test_mha_with_rope_matches_float64_per_head_loop(run_multihead_self_attention_with_rope, impl, device, case):
    """Causal MHA with RoPE on Q and K of every head, token_positions (1, seq) or
    (batch, seq) (the head axis is a batch axis: every head of a sequence uses
    that sequence's positions)."""
    _check_mha_rope(run_multihead_self_attention_with_rope, impl, device, case)


@pytest.mark.spec("2.mha")
@strict
@given(case=sn.mha_cases())
def test_mha_with_rope_any_leading_dims_and_positions(run_multihead_self_attention_with_rope, impl, device, case):
    """STRICT: the same for any number of leading dims and token_positions of
    any broadcasting shape ((seq,), (a, 1, seq)...)."""
    _check_mha_rope(run_multihead_self_attention_with_rope, impl, device, case)


@pytest.mark.spec("2.mha")
@strict
@given(case=MHA_CONTRACT)
def test_mha_with_rope_default_positions(run_multihead_self_attention_with_rope, device, case):
    """STRICT (the handout leaves None undefined): token_positions omitted
    means 0..seq-1."""
    run = run_multihead_self_attention_with_rope
    out, bugs = _mha_rope_observed(run, device, case, default_positions=True)
    second = hints.other(case, *SECOND_MHA)
    assert_close(
        out,
        oracle.mha(*_oracle_args(case), theta=case.theta),
        tol.MHA_F32,
        rule="MHA with RoPE, token_positions omitted = 0..seq-1",
        hints=bugs,
        again=lambda: _mha_rope_observed(run, device, second, default_positions=True),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}",
    )


@pytest.mark.spec("2.mha")
@pytest.mark.parametrize("rope", [False, True], ids=["MHA is causal", "MHA with RoPE is causal"])
@given(case=MHA_CONTRACT, cut=st.integers(0, sn.MAX_SEQ), seed=sn.seeds)
def test_mha_is_causal(
    run_multihead_self_attention,
    run_multihead_self_attention_with_rope,
    device,
    rope,
    case,
    cut,
    seed,
):
    """Output at position i never depends on inputs at positions > i (with
    RoPE: at the case's token_positions)."""
    seq, d_model = case.x.shape[-2:]
    cut = cut % seq
    changed = case.x.clone()
    changed[..., cut + 1 :, :] = torch.randn(
        changed[..., cut + 1 :, :].shape, generator=torch.Generator().manual_seed(seed)
    )

    def run(x):
        if rope:
            return _cpu(
                _run_mha_rope(run_multihead_self_attention_with_rope, case._replace(x=x), device, case.positions)
            )
        return _cpu(run_multihead_self_attention(d_model, case.num_heads, *_weights(case, device), x.to(device)))

    assert_close(
        run(changed)[..., : cut + 1, :],
        run(case.x)[..., : cut + 1, :],
        tol.MHA_F32,
        rule=f"causal: outputs at positions ≤ {cut} must not change when later tokens change",
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, tokens after {cut} replaced",
    )


@pytest.mark.spec("2.mha")
@given(case=MHA_CONTRACT, shift=st.integers(1, 3 * sn.MAX_SEQ))
def test_mha_with_rope_invariant_to_position_shift(run_multihead_self_attention_with_rope, device, case, shift):
    """RoPE rotates Q and K only, and scores depend on m − n, so adding the
    same offset to every position leaves the output unchanged."""
    run = run_multihead_self_attention_with_rope
    base = _cpu(_run_mha_rope(run, case, device, case.positions, case.max_seq_len + shift))
    out, bugs = _mha_rope_observed(run, device, case, shift)
    second = hints.other((case, shift), *SECOND_SHIFTS)
    assert_close(
        out,
        base,
        tol.MHA_F32,
        rule=f"MHA with RoPE: shifting every position by {shift} changes nothing",
        hints=bugs,
        again=lambda: _mha_rope_observed(run, device, *second),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, pos {case.positions.tolist()}",
    )
