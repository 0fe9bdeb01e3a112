"""What the single-switch catalogs (tests/test_hints_*switches*.py, test_hints_tokenizer.py) read of a check."""

import pytest

from lmspec.conformance.hints import named_causes


def failure_causes(check) -> list[str]:
    """The causes that ``check``'s failure names (it must fail)."""
    with pytest.raises(AssertionError) as failure:
        check()
    return named_causes(str(failure.value))
