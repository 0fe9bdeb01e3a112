"""SPEC §2 scaled dot-product attention and causal multi-head self-attention.

Oracles: F.scaled_dot_product_attention in float64 (SDPA) and an explicit
float64 loop over heads (MHA, conformance/oracles/nn.py). Properties: masked
keys have weight exactly 0, rows are normalised, True means "may attend",
causality, RoPE on Q and K only (so a common position shift changes nothing).
"""

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from conformance import tolerances as tol
from conformance.asserts import assert_close, assert_shape
from conformance.oracles import nn as oracle
from conformance.strategies import nn as sn

TOL_SDPA = {torch.float32: tol.SDPA_F32, torch.bfloat16: tol.SDPA_BF16}


def _two_heads() -> sn.MHACase:
    """Pinned trap: 2 heads of d_k = 4, 3 tokens, so head layout, RoPE pairing
    and masking bugs all show (with a hint) before any shrinking."""
    g = sn.generator(1)
    x = sn.randn(g, 1, 3, 8)
    q_w, k_w, v_w, o_w = (sn.weight(g, 8, 8) for _ in range(4))
    return sn.MHACase(x, q_w, k_w, v_w, o_w, 2, 10000.0, 16, torch.tensor([[2, 5, 9]]))


TWO_HEADS = _two_heads()


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
@pytest.mark.spec("2.sdpa")
@given(case=sn.sdpa_cases())
def test_sdpa_matches_float64(run_scaled_dot_product_attention, device, float_dtype, case):
    """softmax(QKᵀ/√d_k, masked −inf) V for any leading dims, mask broadcast
    over leading dims, True = may attend."""
    q, k, v, mask = (t.to(float_dtype) if t.is_floating_point() else t for t in case)
    out = run_scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), mask.to(device))
    assert_shape(out, (*q.shape[:-1], v.shape[-1]), rule="attention output is (..., n, d_v)")
    assert_close(
        out,
        oracle.sdpa(q, k, v, mask),
        TOL_SDPA[float_dtype],
        rule=f"scaled dot-product attention ({float_dtype} vs float64)",
        hints=_sdpa_hints(q, k, v, mask),
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} V{tuple(v.shape)} mask{tuple(mask.shape)}",
    )


@pytest.mark.spec("2.sdpa")
@given(case=sn.sdpa_cases())
def test_sdpa_without_mask(run_scaled_dot_product_attention, device, case):
    """mask=None attends to every key."""
    q, k, v, _ = case
    out = run_scaled_dot_product_attention(q.to(device), k.to(device), v.to(device))
    assert_close(
        out,
        oracle.sdpa(q, k, v),
        tol.SDPA_F32,
        rule="attention without a mask (float32 vs float64)",
        hints=[("missing 1/sqrt(d_k) scaling", lambda: oracle.attention(q, k, v, scale=1.0))],
        context=f"Q{tuple(q.shape)} K{tuple(k.shape)} V{tuple(v.shape)}",
    )


@pytest.mark.spec("2.sdpa")
@given(case=sn.sdpa_cases(), key=st.integers(0, 5))
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
@given(case=sn.sdpa_cases(), value=st.floats(-4, 4, allow_nan=False, width=16))
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
@given(case=sn.sdpa_cases(), seed=sn.seeds)
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


@pytest.mark.spec("2.mha")
@given(case=sn.mha_cases())
@example(case=TWO_HEADS)
def test_mha_matches_float64_per_head_loop(run_multihead_self_attention, device, case):
    """Causal MHA without RoPE: heads grouped head by head, concatenated in order."""
    d_model = case.x.shape[-1]
    out = run_multihead_self_attention(d_model, case.num_heads, *_weights(case, device), case.x.to(device))
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
@given(case=sn.mha_cases())
@example(case=TWO_HEADS)
def test_mha_with_rope_matches_float64_per_head_loop(run_multihead_self_attention_with_rope, device, case):
    """Causal MHA with RoPE on Q and K of every head at the given token_positions."""
    d_model = case.x.shape[-1]
    out = run_multihead_self_attention_with_rope(
        d_model,
        case.num_heads,
        case.max_seq_len,
        case.theta,
        *_weights(case, device),
        case.x.to(device),
        token_positions=case.positions.to(device),
    )
    assert_shape(out, case.x.shape, rule="MHA output is (..., seq, d_model)")
    assert_close(
        out,
        oracle.mha(
            case.x,
            case.q_w,
            case.k_w,
            case.v_w,
            case.o_w,
            case.num_heads,
            theta=case.theta,
            positions=case.positions,
        ),
        tol.MHA_F32,
        rule="causal MHA with RoPE (float32 vs float64 per-head loop)",
        hints=_mha_hints(case, case.theta, case.positions),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, pos {case.positions.tolist()}",
    )


@pytest.mark.spec("2.mha")
@given(case=sn.mha_cases())
def test_mha_with_rope_default_positions(run_multihead_self_attention_with_rope, device, case):
    """token_positions is optional and defaults to 0..seq-1."""
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
@given(case=sn.mha_cases(), cut=st.integers(0, sn.MAX_SEQ), seed=sn.seeds)
def test_mha_is_causal(
    run_multihead_self_attention,
    run_multihead_self_attention_with_rope,
    device,
    rope,
    case,
    cut,
    seed,
):
    """Output at position i never depends on inputs at positions > i."""
    seq, d_model = case.x.shape[-2:]
    cut = cut % seq
    changed = case.x.clone()
    changed[..., cut + 1 :, :] = torch.randn(
        changed[..., cut + 1 :, :].shape, generator=torch.Generator().manual_seed(seed)
    )

    def run(x):
        if rope:
            return _cpu(
                run_multihead_self_attention_with_rope(
                    d_model,
                    case.num_heads,
                    case.max_seq_len,
                    case.theta,
                    *_weights(case, device),
                    x.to(device),
                )
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
@given(case=sn.mha_cases(), shift=st.integers(1, 3 * sn.MAX_SEQ))
def test_mha_with_rope_invariant_to_position_shift(run_multihead_self_attention_with_rope, device, case, shift):
    """RoPE rotates Q and K only, and scores depend on m − n, so adding the
    same offset to every position leaves the output unchanged."""
    d_model = case.x.shape[-1]
    max_seq_len = case.max_seq_len + shift

    def run(positions):
        return run_multihead_self_attention_with_rope(
            d_model,
            case.num_heads,
            max_seq_len,
            case.theta,
            *_weights(case, device),
            case.x.to(device),
            token_positions=positions.to(device),
        )

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
