"""Self-tests of a composite's failure put down to a failing part
(hints.part_hints, the oracles' ``parts=`` swaps): the oracle's block with
the implementation's RMSNorm swapped in reproduces the implementation's
block on the failing input and on the second, and the block's failure says
``explained by 2.rmsnorm (fix that first)``; a right part, or a part that
does not reproduce, says nothing."""

from functools import partial

import pytest
import torch

from lmspec.conformance import hints
from lmspec.conformance import tolerances as tol
from lmspec.conformance.asserts import assert_close
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.strategies import nn as sn

RULE = "pre-norm Transformer block"
EXPLAINED = "explained by 2.rmsnorm (fix that first)"


def _case(seed: int, batch: int = 2, seq: int = 5, heads: int = 2, d_k: int = 4, d_ff: int = 12):
    g = sn.generator(seed)
    weights = sn.random_weights(g, oracle.block_weight_shapes(heads * d_k, d_ff))
    return sn.randn(g, batch, seq, heads * d_k), weights, heads


def _observed(implementation, rmsnorm_part, case):
    """An implementation's block on ``case``, with the swap of its RMSNorm."""
    x, weights, heads = case

    def composite(**kw):
        return oracle.block(x, weights, heads, 10000.0, **kw)

    swaps = [("2.rmsnorm", lambda: composite(parts={"rmsnorm": rmsnorm_part}))]
    return implementation(x, weights, heads), hints.part_hints(swaps, composite, tol.BLOCK_F32)


def _message(implementation, rmsnorm_part) -> str:
    first, second = _case(1), _case(2, batch=1, seq=4, heads=3)
    out, bugs = _observed(implementation, rmsnorm_part, first)
    x, weights, heads = first
    with pytest.raises(AssertionError) as failure:
        assert_close(
            out,
            oracle.block(x, weights, heads, 10000.0),
            tol.BLOCK_F32,
            rule=RULE,
            hints=bugs,
            again=lambda: _observed(implementation, rmsnorm_part, second),
        )
    return str(failure.value)


MEAN_ABS = partial(oracle.rmsnorm, bug="mean_abs")


def _block_with_mean_abs_norm(x, weights, heads):
    return oracle.block(x, weights, heads, 10000.0, parts={"rmsnorm": MEAN_ABS}).float()


def _post_norm_block(x, weights, heads):
    return oracle.block(x, weights, heads, 10000.0, norm="post").float()


def test_a_part_swapped_in_is_the_part_the_oracle_uses():
    """The swap is real: a gain-less RMSNorm swapped in gives the block whose
    norm gains are all ones (computed without any swap)."""
    x, weights, heads = _case(3)
    ones = {k: (torch.ones_like(v) if k.startswith("ln") else v) for k, v in weights.items()}
    swapped = oracle.block(x, weights, heads, 10000.0, parts={"rmsnorm": partial(oracle.rmsnorm, bug="no_gain")})
    torch.testing.assert_close(swapped, oracle.block(x, ones, heads, 10000.0))
    assert not torch.allclose(swapped, oracle.block(x, weights, heads, 10000.0))


def test_a_failing_part_that_reproduces_on_both_inputs_explains_the_block():
    assert EXPLAINED in _message(_block_with_mean_abs_norm, MEAN_ABS)


def test_a_part_that_does_not_reproduce_explains_nothing():
    """The block's own bug (post-norm) with a failing RMSNorm that is not it."""
    assert "likely cause" not in _message(_post_norm_block, MEAN_ABS)


def test_a_right_part_explains_nothing_even_where_the_failure_is_within_reach():
    """A composite a little outside the bound, and a part within the bound
    whose swap lies within the hint tolerance of the output: a right part
    cannot be the cause."""
    exact = oracle.block(*_case(4)[:1], _case(4)[1], 2, 10000.0)
    bound = tol.BLOCK_F32.atol + tol.BLOCK_F32.rtol * exact.abs()
    out, near = exact + 1.2 * bound, exact + 0.5 * bound
    assert (out - near).abs().le(tol.BLOCK_F32.atol + tol.BLOCK_F32.rtol * near.abs()).all()  # within reach

    def observed():
        return out, hints.part_hints([("2.rmsnorm", lambda: near)], lambda: exact, tol.BLOCK_F32)

    with pytest.raises(hints.PartIsRight):
        observed()[1][0][1]()
    with pytest.raises(AssertionError) as failure:
        assert_close(out, exact, tol.BLOCK_F32, rule=RULE, hints=observed()[1], again=observed)
    assert "likely cause" not in str(failure.value), failure.value


def test_of_several_parts_that_explain_the_innermost_alone_is_named():
    """An LM whose block fails because of its RMSNorm: both swaps reproduce,
    the RMSNorm (listed first) is the one to fix."""
    named = hints.confirmed(
        ["final RMSNorm missing", hints.explained_by("2.rmsnorm"), hints.explained_by("2.mha")],
        lambda: ["final RMSNorm missing", hints.explained_by("2.rmsnorm"), hints.explained_by("2.mha")],
    )
    assert named == [hints.explained_by("2.rmsnorm")]


def test_causes_without_a_part_are_kept_as_they_are():
    assert hints.confirmed(["a", "b"], lambda: ["b", "a"]) == ["a", "b"]
