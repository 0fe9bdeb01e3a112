"""Assertions of the gpt2 suite on top of conformance/asserts.py: exact
outputs (ids, windows) with their likely causes, named as ``assert_close``
names them (conformance/hints.py)."""

from collections.abc import Sequence
from typing import Any

from lmspec.conformance.asserts import Again, Hint, assert_equal
from lmspec.conformance.hints import UNSURE, confirmed, likely_causes, reporting


def reproduced(observed: Any, bugs: Sequence[Hint]) -> list[str]:
    """The causes of ``bugs`` ((cause, thunk) pairs) whose replay gives exactly ``observed``."""
    found = []
    for cause, replay in bugs:
        try:
            assert_equal(observed, replay(), rule=cause)
        except UNSURE:  # a replay that differs, or cannot be computed here, is not named
            continue
        found.append(cause)
    return found


def assert_equal_explained(
    actual: Any,
    expected: Any,
    *,
    rule: str,
    hints: Sequence[Hint] = (),
    again: Again | None = None,
    observed: Any = None,
    context: str = "",
) -> None:
    """``assert_equal``; where it fails, a cause of ``hints`` is named (at the
    end of the first line, where reports show it) when its replay gives
    ``observed`` (the implementation's whole output, when ``actual`` is a part
    of it such as a count; default ``actual``) AND its replay on the test's
    second input gives the implementation's output there (``again``, required
    with ``hints``, returns that output and the same bugs' thunks there)."""
    __tracebackhide__ = True
    if hints and again is None:
        raise TypeError(f"{rule}: a hint is named only when a second input confirms it: pass again=")
    try:
        assert_equal(actual, expected, rule=rule, context=context)
    except AssertionError as exc:
        seen = actual if observed is None else observed
        causes = confirmed(reproduced(seen, hints), lambda: reproduced(*again())) if hints and reporting() else []
        lines = str(exc).split("\n")
        lines[0] += likely_causes(causes)
        raise AssertionError("\n".join(lines)) from None
