"""Submission-made text made safe to print: no C0 or C1 control character but
newline and tab (issue 19: an exception message that clears the screen, moves
the cursor or retitles the terminal reaches nobody's terminal).

Everything a submission can say reaches the grader through the judge's report
(test messages, load errors, captured output) or the environment's build
logs; both are read through :func:`plain_data`, so the table, the console
logs, the CSV and results.json carry the text without the controls."""

import re
from typing import Any

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text: str) -> str:
    """``text`` without control characters other than newline and tab."""
    return _CONTROLS.sub("", text)


def plain_data(value: Any) -> Any:
    """Every string (keys included) of decoded JSON made :func:`plain`."""
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, dict):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    return value


def raised(exc: BaseException, limit: int = 200) -> str:
    """``ValueError: its first line`` (just the name when the message is
    empty, as a submission's exception's may be)."""
    first = (str(exc).strip().splitlines() or [""])[0][:limit]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
