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

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from lmspec.conformance import tolerances as tol
from lmspec.conformance.asserts import assert_close, assert_shape
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.strategies import nn as sn

TOL_SDPA = {torch.float32: tol.SDPA_F32, torch.bfloat16: tol.SDPA_BF16}
strict = pytest.mark.strict
SDPA_CONTRACT = sn.sdpa_cases(lead_dims=sn.BATCH_OR_HEADS, contract_masks=True)
MHA_CONTRACT = sn.mha_cases(lead_dims=sn.BATCH, contract_positions=True)


def _two_heads() -> sn.MHACase:
    """Pinned trap: 2 heads of d_k = 4, 3 tokens, so head layout, RoPE pairing
    and masking bugs all show (with a hint) before any shrinking."""
    g = sn.generator(1)
    x = sn.randn(g, 1, 3, 8)
    q_w, k_w, v_w, o_w = (sn.weight(g, 8, 8) for _ in range(4))
    return sn.MHACase(x, q_w, k_w, v_w, o_w, 2, 10000.0, 16, torch.tensor([[2, 5, 9]]))


TWO_HEADS = _two_heads()
# batch = heads = 2 with different positions per sequence: positions that are
# not broadcast over the head axis go wrong silently here (no shape error).
TWO_HEADS_TWO_SEQUENCES = TWO_HEADS._replace(
    x=torch.cat([TWO_HEADS.x, sn.randn(sn.generator(2), 1, 3, 8)]), positions=torch.tensor([[2, 5, 9], [0, 1, 3]])
)


def _cpu(t):
    return torch.as_tensor(t).detach().cpu()


def _sdpa_hints(q, k, v, mask):
    return [
        ("mask inverted (True must mean 'may attend')", lambda: oracle.sdpa(q, k, v, ~mask)),
        ("missing 1/sqrt(d_k) scaling", lambda: oracle.attention(q, k, v, mask, scale=1.0)),
        (
            "scaled by 1/d_k instead of 1/sqrt(d_k)",
            lambda: oracle.attention(q, k, v, mask, scale=1.0 / q.shape[-1]),
        ),
        (
            "masked scores set to 0 instead of −inf",
            lambda: oracle.attention(q, k, v, mask, masked_value=0.0),
        ),
        ("mask ignored", lambda: oracle.sdpa(q, k, v)),
    ]


# --- scaled dot-product attention -------------------------------------------------
def _check_sdpa(run_sdpa, device, case, dtype):
    __tracebackhide__ = True
    q, k, v, mask = (t.to(dtype) if t.is_floating_point() else t for t in case)
    out = run_sdpa(q.to(device), k.to(device), v.to(device), mask.to(device))
    assert_shape(out, (*q.shape[:-1], v.shape[-1]), rule="attention output is (..., n, d_v)")
    assert_close(
        out,
        oracle.sdpa(q, k, v, mask),
        TOL_SDPA[dtype],
        rule=f"scaled dot-product attention ({dtype} vs float64)",
        hints=_sdpa_hints(q, k, v, mask),
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} V{tuple(v.shape)} mask{tuple(mask.shape)}",
    )


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT)
def test_sdpa_matches_float64(run_scaled_dot_product_attention, device, case):
    """softmax(QKᵀ/√d_k, masked −inf) V on (batch, n, d) and (batch, heads, n, d),
    the mask of the scores' full shape or (n, m) broadcast, True = may attend."""
    _check_sdpa(run_scaled_dot_product_attention, device, case, torch.float32)


@pytest.mark.spec("2.sdpa")
@strict
@given(case=sn.sdpa_cases())
def test_sdpa_any_leading_dims_and_mask_broadcast(run_scaled_dot_product_attention, device, case):
    """STRICT: the same for any number of leading dims ((n, d) without a batch,
    5-D...) and masks broadcasting partially ((1, n, m), (heads, n, m)...)."""
    _check_sdpa(run_scaled_dot_product_attention, device, case, torch.float32)


@pytest.mark.spec("2.sdpa")
@strict
@given(case=SDPA_CONTRACT)
def test_sdpa_bfloat16_matches_float64(run_scaled_dot_product_attention, device, case):
    """STRICT: bfloat16 Q, K, V (the handout uses float32) give attention within
    bfloat16 accuracy of the float64 result."""
    _check_sdpa(run_scaled_dot_product_attention, device, case, torch.bfloat16)


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT)
def test_sdpa_without_mask(run_scaled_dot_product_attention, device, case):
    """mask=None (the default) attends to every key."""
    q, k, v, _ = case
    out = run_scaled_dot_product_attention(q.to(device), k.to(device), v.to(device))
    assert_shape(out, (*q.shape[:-1], v.shape[-1]), rule="attention output is (..., n, d_v)")
    assert_close(
        out,
        oracle.sdpa(q, k, v),
        tol.SDPA_F32,
        rule="attention without a mask (float32 vs float64)",
        hints=[("missing 1/sqrt(d_k) scaling", lambda: oracle.attention(q, k, v, scale=1.0))],
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} V{tuple(v.shape)}",
    )


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT, key=st.integers(0, 5))
def test_sdpa_masked_keys_have_zero_weight(run_scaled_dot_product_attention, device, case, key):
    """A key masked out for query i has weight exactly 0: adding 1e4 to its
    value row changes nothing in row i."""
    q, k, v, mask = case
    j = key % k.shape[-2]
    bumped = v.clone()
    bumped[..., j, :] += 1e4
    base = _cpu(run_scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), mask.to(device)))
    out = _cpu(run_scaled_dot_product_attention(q.to(device), k.to(device), bumped.to(device), mask.to(device)))
    blind = (~mask[..., j]).expand(base.shape[:-1])  # queries that may not see key j
    note(f"key {j}; queries blind to it: {blind.sum().item()}")
    assert_close(
        out[blind],
        base[blind],
        tol.SDPA_F32,
        rule=f"masked key {j} has weight exactly 0 (its value row must not matter)",
        hints=[
            (
                "masked scores set to 0 instead of −inf",
                lambda: oracle.attention(q, k, bumped, mask, masked_value=0.0).expand(*base.shape)[blind],
            )
        ],
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


@pytest.mark.spec("2.sdpa")
@given(case=SDPA_CONTRACT, seed=sn.seeds)
def test_sdpa_mask_true_means_attend(run_scaled_dot_product_attention, device, case, seed):
    """With exactly one True per row, query i returns the value row of that key."""
    q, k, v, _ = case
    n, m = q.shape[-2], k.shape[-2]
    chosen = torch.randint(0, m, (n,), generator=torch.Generator().manual_seed(seed))
    mask = torch.nn.functional.one_hot(chosen, m).bool()
    out = run_scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), mask.to(device))
    assert_close(
        out,
        oracle.f64(v)[..., chosen, :],
        tol.SDPA_F32,
        rule="mask True = may attend: the only allowed key gets weight 1",
        hints=[("mask inverted (True treated as 'masked out')", lambda: oracle.sdpa(q, k, v, ~mask))],
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)}, allowed key per query {chosen.tolist()}",
    )


# --- multi-head self-attention -------------------------------------------------------
def _weights(case, device):
    return [w.to(device) for w in (case.q_w, case.k_w, case.v_w, case.o_w)]


def _mha_hints(case, theta=None, positions=None):
    w = case.q_w, case.k_w, case.v_w, case.o_w
    x, h = case.x, case.num_heads
    hints = [
        (
            "heads interleaved (head h must take rows h·d_k .. (h+1)·d_k−1)",
            lambda: oracle.mha(x, *w, h, theta=theta, positions=positions, heads="interleaved"),
        ),
        (
            "heads split from interleaved rows (h, h+H, ...) but concatenated in head order",
            lambda: oracle.mha(x, *w, h, theta=theta, positions=positions, heads="interleaved_split"),
        ),
        (
            "not causal (future positions visible)",
            lambda: oracle.mha(x, *w, h, theta=theta, positions=positions, mask="none"),
        ),
        (
            "causal mask excludes the diagonal (i must see j ≤ i)",
            lambda: oracle.mha(x, *w, h, theta=theta, positions=positions, mask="strict"),
        ),
    ]
    if theta is not None:
        hints += [
            (
                "RoPE also applied to V (Q and K only)",
                lambda: oracle.mha(x, *w, h, theta=theta, positions=positions, rope_on_v=True),
            ),
            ("RoPE not applied", lambda: oracle.mha(x, *w, h)),
            ("half-split RoPE", lambda: _half_split_mha(case, theta, positions)),
            (
                "(batch, seq) token_positions not broadcast over the head axis: head h of every "
                "sequence was rotated with row h's positions (insert a head axis, positions[:, None, :])",
                lambda: oracle.mha(x, *w, h, theta=theta, positions=positions, positions_on_head_axis=True),
            ),
        ]
    return hints


def _half_split_mha(case, theta, positions):
    seq = case.x.shape[-2]
    positions = torch.arange(seq) if positions is None else positions
    x = oracle.f64(case.x)
    d_k = case.q_w.shape[0] // case.num_heads
    heads = []
    for h in range(case.num_heads):
        rows = slice(h * d_k, (h + 1) * d_k)
        q, k, v = (oracle.linear(x, w[rows]) for w in (case.q_w, case.k_w, case.v_w))
        q = oracle.rope(q, positions, theta, pairs="half")
        k = oracle.rope(k, positions, theta, pairs="half")
        heads.append(oracle.attention(q, k, v, oracle.causal_mask(seq)))
    return oracle.linear(torch.cat(heads, -1), case.o_w)


def _check_mha(run_mha, device, case):
    __tracebackhide__ = True
    d_model = case.x.shape[-1]
    out = run_mha(d_model, case.num_heads, *_weights(case, device), case.x.to(device))
    assert_shape(out, case.x.shape, rule="MHA output is (..., seq, d_model)")
    assert_close(
        out,
        oracle.mha(case.x, case.q_w, case.k_w, case.v_w, case.o_w, case.num_heads),
        tol.MHA_F32,
        rule="causal multi-head self-attention (float32 vs float64 per-head loop)",
        hints=_mha_hints(case),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}",
    )


@pytest.mark.spec("2.mha")
@given(case=MHA_CONTRACT)
@example(case=TWO_HEADS)
def test_mha_matches_float64_per_head_loop(run_multihead_self_attention, device, case):
    """Causal MHA without RoPE on (batch, seq, d_model): heads grouped head by
    head, concatenated in order."""
    _check_mha(run_multihead_self_attention, device, case)


@pytest.mark.spec("2.mha")
@strict
@given(case=sn.mha_cases())
def test_mha_any_leading_dims(run_multihead_self_attention, device, case):
    """STRICT: MHA works for any number of leading dims, none included (a
    (seq, d_model) input)."""
    _check_mha(run_multihead_self_attention, device, case)


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


def _check_mha_rope(run, device, case):
    __tracebackhide__ = True
    out = _run_mha_rope(run, case, device, case.positions)
    assert_shape(out, case.x.shape, rule="MHA output is (..., seq, d_model)")
    w = case.q_w, case.k_w, case.v_w, case.o_w
    assert_close(
        out,
        oracle.mha(case.x, *w, case.num_heads, theta=case.theta, positions=case.positions),
        tol.MHA_F32,
        rule="causal MHA with RoPE (float32 vs float64 per-head loop)",
        hints=_mha_hints(case, case.theta, case.positions),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, pos {case.positions.tolist()}",
    )


@pytest.mark.spec("2.mha")
@given(case=MHA_CONTRACT)
@example(case=TWO_HEADS)
@example(case=TWO_HEADS_TWO_SEQUENCES)
def test_mha_with_rope_matches_float64_per_head_loop(run_multihead_self_attention_with_rope, device, case):
    """Causal MHA with RoPE on Q and K of every head, token_positions (1, seq) or
    (batch, seq) (the head axis is a batch axis: every head of a sequence uses
    that sequence's positions)."""
    _check_mha_rope(run_multihead_self_attention_with_rope, device, case)


@pytest.mark.spec("2.mha")
@strict
@given(case=sn.mha_cases())
def test_mha_with_rope_any_leading_dims_and_positions(run_multihead_self_attention_with_rope, device, case):
    """STRICT: the same for any number of leading dims and token_positions of
    any broadcasting shape ((seq,), (a, 1, seq)...)."""
    _check_mha_rope(run_multihead_self_attention_with_rope, device, case)


@pytest.mark.spec("2.mha")
@strict
@given(case=MHA_CONTRACT)
def test_mha_with_rope_default_positions(run_multihead_self_attention_with_rope, device, case):
    """STRICT (the handout leaves None undefined): token_positions omitted
    means 0..seq-1."""
    d_model = case.x.shape[-1]
    out = run_multihead_self_attention_with_rope(
        d_model,
        case.num_heads,
        case.max_seq_len,
        case.theta,
        *_weights(case, device),
        case.x.to(device),
    )
    assert_close(
        out,
        oracle.mha(case.x, case.q_w, case.k_w, case.v_w, case.o_w, case.num_heads, theta=case.theta),
        tol.MHA_F32,
        rule="MHA with RoPE, token_positions omitted = 0..seq-1",
        hints=_mha_hints(case, case.theta),
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
    max_seq_len = case.max_seq_len + shift

    def run(positions):
        return _run_mha_rope(run_multihead_self_attention_with_rope, case, device, positions, max_seq_len)

    base = _cpu(run(case.positions))
    assert_close(
        run(case.positions + shift),
        base,
        tol.MHA_F32,
        rule=f"MHA with RoPE: shifting every position by {shift} changes nothing",
        hints=[
            (
                "RoPE also applied to V (Q and K only)",
                lambda: oracle.mha(
                    case.x,
                    case.q_w,
                    case.k_w,
                    case.v_w,
                    case.o_w,
                    case.num_heads,
                    theta=case.theta,
                    positions=case.positions + shift,
                    rope_on_v=True,
                ),
            )
        ],
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, pos {case.positions.tolist()}",
    )
