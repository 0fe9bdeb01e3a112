"""Self-tests of near misses (conformance/near.py): where no known bug
reproduces a failure, the message says which measurable quantities are right
(the scale, the positions before the first wrong one, rows summing to 1), and
says nothing of the kind where a cause is named."""

import pytest
import torch

from lmspec.conformance import hints, near
from lmspec.conformance.asserts import assert_close
from lmspec.conformance.tolerances import Tolerance

TOL = Tolerance(1e-6, 1e-6)


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_positions_names_the_first_wrong_position():
    expected = _x(2, 5, 3)
    actual = expected.clone()
    actual[1, 2:, 0] += 0.5  # one sequence, from position 2 on
    assert near.positions(-2)(actual, expected, TOL) == "values right before position 2, differ from position 2 on"


def test_positions_names_a_single_wrong_position_and_every_position():
    expected = _x(5, 3)
    one = expected.clone()
    one[3, 1] += 1.0
    assert near.positions(-2)(one, expected, TOL) == "values differ at position 3 only"
    assert near.positions(-2)(expected + 1.0, expected, TOL) == "values differ at every position"


def test_scale_right_or_off_by_a_factor():
    expected = _x(4, 6)
    assert near.scale(expected * 1.05, expected, TOL) == "scale right"
    assert near.scale(expected * 2.0, expected, TOL) == "scale ×2 of the expected"


def test_sums_to_one():
    p = torch.softmax(_x(3, 4), -1)
    assert near.sums_to_one(-1)(p, p, TOL) == "sums to 1 along dim -1: yes"
    assert near.sums_to_one(-1)(p * 1.5, p, TOL) == "sums to 1 along dim -1: no"


def test_zeros_right_or_how_many_differ():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    assert near.zeros(p * 0.9, p, TOL) == "zeros right"
    assert near.zeros(p.roll(1, -1), p, TOL) == "zeros wrong at 4 of 6 entries"
    assert near.zeros(p + 1.0, p + 1.0, TOL) is None  # nothing expected to be zero: no fact


def test_a_failure_without_a_cause_says_what_is_right():
    expected = _x(2, 5, 3)
    actual = expected.clone()
    actual[:, 4:, :] += 0.01
    with pytest.raises(AssertionError) as failure:
        assert_close(actual, expected, TOL, rule="r", near=(near.scale, near.positions(-2)))
    first = str(failure.value).splitlines()[0]
    assert first.endswith(
        "; no known bug reproduces it; near miss: shape right, scale right, "
        "values right before position 4, differ from position 4 on"
    ), first


def test_a_named_cause_leaves_no_near_miss():
    expected = _x(2, 5, 3)
    actual = expected * 2

    def observed():
        return actual, [("doubled", lambda: expected * 2)]

    with pytest.raises(AssertionError) as failure:
        assert_close(actual, expected, TOL, rule="r", hints=observed()[1], again=observed, near=(near.scale,))
    assert "likely cause: doubled" in str(failure.value)
    assert "near miss" not in str(failure.value)
    assert hints.confirmed(["doubled"], lambda: ["doubled"]) == ["doubled"]
