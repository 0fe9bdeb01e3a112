"""Submission-made text made safe to print: no C0 or C1 control character but
newline and tab (issue 19: an exception message that clears the screen, moves
the cursor or retitles the terminal reaches nobody's terminal), and no lone
surrogate (issue 32: a file name is bytes; Python reads the bytes that are
not UTF-8 as surrogates, which no UTF-8 output can encode): each such byte
is written as the text ``\\x9d``.

Everything a submission can say reaches the grader through the judge's report
(test messages, load errors, captured output) or the environment's build
logs; both are read through :func:`plain_data`. What the grader itself says
of a submission (its paths and names, in the report's header, warnings and
errors) is made plain once, when the report is complete
(:func:`plain_object`), and so are usage errors; so the table, the console
logs, the CSV, results.json and report.html carry the text without them."""

import dataclasses
import enum
import re
from typing import Any

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    # U+DC80..U+DCFF: a byte 0x80..0xFF that was not UTF-8 (os.fsdecode's surrogateescape)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def plain(text: str) -> str:
    """``text`` without control characters other than newline and tab, and
    with every lone surrogate written out as an escape."""
    return _CONTROLS.sub("", _SURROGATES.sub(_escaped, text))


def plain_data(value: Any) -> Any:
    """Every string (keys included) of decoded JSON made :func:`plain`."""
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, dict):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    return value


def plain_object(value: Any) -> Any:
    """:func:`plain_data` through dataclasses (changed in place), tuples and
    sets as well; enum members are left as they are."""
    if isinstance(value, enum.Enum):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            setattr(value, f.name, plain_object(getattr(value, f.name)))
        return value
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(plain_object(v) for v in value))
    if isinstance(value, (list, tuple, set)):
        return type(value)(plain_object(v) for v in value)
    if isinstance(value, dict):
        return {plain_object(k): plain_object(v) for k, v in value.items()}
    return value


def raised(exc: BaseException, limit: int = 200) -> str:
    """``ValueError: its first line`` (just the name when the message is
    empty, as a submission's exception's may be)."""
    first = (str(exc).strip().splitlines() or [""])[0][:limit]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
