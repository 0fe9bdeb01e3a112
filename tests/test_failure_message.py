"""A failing test's message carries the input Hypothesis found (conformance/report.py failure_message),
whichever way the installed Hypothesis words its note."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lmspec.conformance.report import failure_message


@settings(database=None, derandomize=True, max_examples=50)
@given(n=st.integers(min_value=0, max_value=1000))
def _fails_from_seven(n):
    assert n < 7, f"n must stay below 7, got {n}"


@settings(database=None, derandomize=True)
@given(n=st.integers(min_value=0, max_value=5))
@example(n=11)
def _fails_on_its_example(n):
    assert n < 7, f"n must stay below 7, got {n}"


@pytest.mark.parametrize(
    ("test", "shown"), [(_fails_from_seven, "n=7"), (_fails_on_its_example, "n=11")], ids=["generated", "explicit"]
)
def test_the_failing_input_is_in_the_message(test, shown):
    with pytest.raises(AssertionError) as failure:
        test()
    message = failure_message(failure.value)
    first, *rest = message.splitlines()
    assert first == f"AssertionError: n must stay below 7, got {shown[2:]}", message
    assert any(line.startswith(("Falsifying", "Failing")) for line in rest), message
    assert any(shown in line for line in rest), message
