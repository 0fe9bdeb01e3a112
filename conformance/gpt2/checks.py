"""Assertions of the gpt2 suite on top of conformance/asserts.py."""

from collections.abc import Sequence
from typing import Any

from lmspec.conformance.asserts import assert_equal


def assert_equal_explained(
    actual: Any, expected: Any, *, rule: str, causes: Sequence[str] = (), context: str = ""
) -> None:
    """``assert_equal``, with the likely causes (each verified by its replay
    before it is passed here) at the end of the first line, where reports show them."""
    __tracebackhide__ = True
    try:
        assert_equal(actual, expected, rule=rule, context=context)
    except AssertionError as exc:
        lines = str(exc).split("\n")
        lines[0] += "".join(f"; likely cause: {c}" for c in causes)
        raise AssertionError("\n".join(lines)) from None
