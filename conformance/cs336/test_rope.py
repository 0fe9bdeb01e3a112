"""SPEC §2 RoPE: interleaved pairs (x₂ₖ, x₂ₖ₊₁) rotated by θ_{i,k} = i /
theta^(2k/d_k), positions taken from ``token_positions`` (any values below
max_seq_len, broadcasting over leading dims).

Oracle: the rotation written out per pair in float64
(conformance/cs336/oracles/nn.py). Properties: identity at position 0, norm
preservation, relative invariance of inner products, positions carried by
``token_positions`` rather than the sequence index.

MUST tests use the contract's shapes (SPEC §2): inputs ``(batch, seq, d_k)``
with positions ``(seq,)``, ``(1, seq)`` or ``(batch, seq)``, and ``(batch,
heads, seq, d_k)`` with positions ``(seq,)`` or ``(1, seq)``. Any other number
of leading dims or broadcast of the positions is a STRICT test.
"""

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from lmspec.conformance import hints
from lmspec.conformance import tolerances as tol
from lmspec.conformance.asserts import assert_close, assert_shape, describe_mismatch
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.oracles.nn_bugs import KNOWN_BUGS
from lmspec.conformance.cs336.strategies import nn as sn

strict = pytest.mark.strict
CONTRACT = sn.rope_cases(lead_dims=sn.BATCH_OR_HEADS, contract_positions=True)


# Second inputs: a likely cause is named only when its replay (oracles/nn_bugs.py)
# reproduces the output on the failing input and on one of these (conformance/hints.py).
# d_k ≥ 4: with one pair, the half-split, de-interleaved and exponent bugs are the
# right rotation; several tokens, at positions that are neither 0 nor 0..seq-1.
_s = sn.generator(1)
SECOND_ROPE = (
    sn.RopeCase(sn.randn(_s, 2, 3, 8), torch.tensor([5, 1, 9]), 10000.0, 16),
    sn.RopeCase(sn.randn(_s, 1, 2, 4, 6), torch.tensor([[7, 0, 3, 12]]), 500.0, 32),
)
SECOND_BASIS = ((4, 5), (3, 7))  # (d_k/2, position) of test_rope_rotates_adjacent_pairs
SECOND_PERMUTED = ((SECOND_ROPE[0], torch.tensor([2, 0, 1])), (SECOND_ROPE[1], torch.tensor([3, 1, 0, 2])))


def _call(run_rope, case, device, x=None, positions=None):
    x = case.x if x is None else x
    positions = case.positions if positions is None else positions
    return run_rope(x.shape[-1], case.theta, case.max_seq_len, x.to(device), positions.to(device))


def _observed(run_rope, device, case, perm=None):
    """The implementation's output on ``case`` (its tokens permuted by ``perm``)
    and the replays of RoPE's known bugs there."""
    x, positions = case.x, case.positions
    if perm is not None:
        x, positions = x[..., perm, :], positions[..., perm]
    out = _call(run_rope, case, device, x=x, positions=positions)
    return out, KNOWN_BUGS.thunks("2.rope", x, positions, case.theta)


def _check_rope(run_rope, device, case):
    __tracebackhide__ = True
    out, bugs = _observed(run_rope, device, case)
    assert_shape(out, case.x.shape, rule="RoPE keeps the shape")
    assert_close(
        out,
        oracle.rope(case.x, case.positions, case.theta),
        tol.ROPE_F32,
        rule="RoPE rotation of interleaved pairs (float32 vs float64)",
        hints=bugs,
        again=lambda: _observed(run_rope, device, hints.other(case, *SECOND_ROPE)),
        context=f"x{tuple(case.x.shape)}, positions {case.positions.tolist()}, theta={case.theta}",
    )


@pytest.mark.spec("2.rope")
@given(case=CONTRACT)
@example(case=sn.RopeCase(torch.arange(8.0).reshape(1, 1, 8), torch.tensor([3]), 10000.0, 4))
def test_rope_matches_float64(run_rope, device, case):
    """RoPE rotates each adjacent pair (x₂ₖ, x₂ₖ₊₁) by i / theta^(2k/d_k), for
    (batch, seq, d_k) and (batch, heads, seq, d_k) inputs and arbitrary
    positions of the contract's shapes."""
    _check_rope(run_rope, device, case)


@pytest.mark.spec("2.rope")
@strict
@given(case=sn.rope_cases())
def test_rope_any_leading_dims_and_position_broadcast(run_rope, device, case):
    """STRICT: the same for any number of leading dims ((seq, d_k), 5-D...) and
    positions of any shape that broadcasts against them ((heads, seq),
    (batch, heads, seq)...)."""
    _check_rope(run_rope, device, case)


def _basis(d_half, position):
    """The d_k basis vectors as d_k inputs of one token each, at ``position``."""
    return torch.eye(2 * d_half)[:, None, :], torch.tensor([position])


def _basis_observed(run_rope, device, d_half, position):
    basis, positions = _basis(d_half, position)
    out = run_rope(2 * d_half, 10000.0, 64, basis.to(device), positions.to(device))
    return torch.as_tensor(out).detach().cpu(), KNOWN_BUGS.thunks("2.rope", basis, positions, 10000.0)


def _reproduced(out, bugs) -> list[str]:
    """The causes whose replay gives ``out``."""
    return [cause for cause, make in bugs if describe_mismatch(out, make(), tol.ROPE_F32) is None]


@pytest.mark.spec("2.rope")
@given(d_half=st.integers(1, sn.MAX_ROPE_DK // 2), position=st.integers(1, 63))
def test_rope_rotates_adjacent_pairs(run_rope, device, d_half, position):
    """Basis vector e₂ₖ (or e₂ₖ₊₁) stays inside its pair (2k, 2k+1): it becomes
    cos·e₂ₖ + sin·e₂ₖ₊₁ (or −sin·e₂ₖ + cos·e₂ₖ₊₁)."""
    d_k = 2 * d_half
    basis, positions = _basis(d_half, position)
    out, bugs = _basis_observed(run_rope, device, d_half, position)
    second = hints.other((d_half, position), *SECOND_BASIS)
    pair_of = torch.arange(d_k) // 2
    outside = (pair_of[:, None] != pair_of[None, :]) & (out[:, 0, :].abs() > tol.ROPE_F32.atol)
    if bool(outside.any()):
        i, j = (int(v) for v in outside.nonzero()[0])
        causes = hints.confirmed(
            _reproduced(out, bugs), lambda: _reproduced(*_basis_observed(run_rope, device, *second))
        )
        raise AssertionError(
            f"RoPE must rotate adjacent pairs (2k, 2k+1): input e_{i} at position {position} "
            f"leaks into element {j} (value {out[i, 0, j].item():.4g}), d_k={d_k}" + hints.likely_causes(causes)
        )
    assert_close(
        out,
        oracle.rope(basis, positions, 10000.0),
        tol.ROPE_F32,
        rule="RoPE maps e₂ₖ to cos·e₂ₖ + sin·e₂ₖ₊₁",
        hints=bugs,
        again=lambda: _basis_observed(run_rope, device, *second),
        context=f"basis vectors, d_k={d_k}, position {position}",
    )


@pytest.mark.spec("2.rope")
@given(case=CONTRACT)
def test_rope_identity_at_position_zero(run_rope, device, case):
    """At position 0 every angle is 0: RoPE returns its input."""
    out = _call(run_rope, case, device, positions=torch.zeros_like(case.positions))
    assert_close(
        out,
        case.x,
        tol.ROPE_F32,
        rule="RoPE is the identity at position 0",
        context=f"x{tuple(case.x.shape)}",
    )


@pytest.mark.spec("2.rope")
@given(case=CONTRACT)
def test_rope_preserves_norm(run_rope, device, case):
    """A rotation preserves the norm of every (token, head) vector."""
    out = torch.as_tensor(_call(run_rope, case, device)).detach().cpu().double()
    assert_close(
        out.norm(dim=-1),
        case.x.double().norm(dim=-1),
        tol.ROPE_F32,
        rule="‖RoPE(x)‖ = ‖x‖",
        context=f"x{tuple(case.x.shape)}, positions {case.positions.tolist()}",
    )


@pytest.mark.spec("2.rope")
@given(
    d_half=st.integers(1, sn.MAX_ROPE_DK // 2),
    theta=st.sampled_from(sn.THETAS),
    positions=st.lists(st.integers(0, sn.MAX_POSITION // 2 - 1), min_size=3, max_size=3),
    seed=sn.seeds,
)
@example(d_half=4, theta=10000.0, positions=[0, 5, 100], seed=0)
def test_rope_inner_product_depends_only_on_offset(run_rope, device, d_half, theta, positions, seed):
    """⟨RoPE(q, m), RoPE(k, n)⟩ = ⟨RoPE(q, m+s), RoPE(k, n+s)⟩: it depends on m − n only."""
    d_k, (m, n, s) = 2 * d_half, positions
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d_k, generator=g)
    q, k = q / q.norm(), k / k.norm()
    x = torch.stack([q, k, q, k])[:, None, :]  # four one-token inputs
    pos = torch.tensor([[m], [n], [m + s], [n + s]])
    out = torch.as_tensor(run_rope(d_k, theta, sn.MAX_POSITION, x.to(device), pos.to(device))).detach().cpu().double()
    out = out[:, 0, :]
    near, far = out[0] @ out[1], out[2] @ out[3]
    note(f"<q,k> at ({m},{n}) = {near.item():.8g}; at ({m + s},{n + s}) = {far.item():.8g}")
    assert_close(
        far,
        near,
        tol.ROPE_DOT_F32,
        rule="⟨RoPE(q,m), RoPE(k,n)⟩ depends only on m − n",
        context=f"d_k={d_k}, theta={theta}, m={m}, n={n}, shift={s}",
    )


@pytest.mark.spec("2.rope")
@given(case=CONTRACT, seed=sn.seeds)
def test_rope_position_comes_from_token_positions(run_rope, device, case, seed):
    """Permuting the tokens together with their positions permutes the output:
    a token's rotation depends on its token_positions entry, not its index."""
    perm = torch.randperm(case.x.shape[-2], generator=torch.Generator().manual_seed(seed))
    out = torch.as_tensor(_call(run_rope, case, device)).detach().cpu()
    permuted, bugs = _observed(run_rope, device, case, perm)
    assert_close(
        permuted,
        out[..., perm, :],
        tol.ROPE_F32,
        rule="RoPE(x[perm], positions[perm]) = RoPE(x, positions)[perm]",
        hints=bugs,
        again=lambda: _observed(run_rope, device, *hints.other((case, perm), *SECOND_PERMUTED)),
        context=f"x{tuple(case.x.shape)}, positions {case.positions.tolist()}, perm {perm.tolist()}",
    )
