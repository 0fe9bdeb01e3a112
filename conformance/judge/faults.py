"""What can go wrong at the door, and how the judge remembers it.

- ``Fault``: how a call into the worker failed beside the implementation
  raising (a timeout, a crash, a protocol violation, a failed start), and
  ``WorkerFault``, the pytest outcome that carries it.
- ``SubmissionError`` and ``remote_exception``: the implementation's own
  exception, rebuilt judge-side from the worker's description.
- ``NotImplementedByAdapter``: a function that is absent or raises
  NotImplementedError ("not implemented" / "not provided").
- ``FaultRegistry``: functions that timed out or crashed in this grade,
  shared by every judge process through a file, so a hanging function costs
  one timeout, not one per test.
- ``RepeatCounter``: the same exception from one function on REPEAT_LIMIT
  inputs of one test ends that test.
"""

import contextlib
import enum
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _pytest.outcomes import OutcomeException

from lmspec.conformance.outcomes import Outcome

#: Crashes of one function before it is not called again in this grade.
CRASH_LIMIT = 3
#: Identical exceptions from one function within one test before it stops.
REPEAT_LIMIT = 5


class Fault(enum.StrEnum):
    """How a call into the worker went wrong, beside the implementation
    raising an exception (which is just a failure)."""

    TIMEOUT = "timeout"  # no answer within the per-call limit: the worker was killed
    CRASH = "crash"  # the worker died during the call
    PROTOCOL = "protocol"  # the worker answered something that is not the protocol
    LOAD = "load"  # the implementation could not be imported or started

    @property
    def outcome(self) -> Outcome:
        return Outcome.TIMEOUT if self is Fault.TIMEOUT else Outcome.ERROR


class WorkerFault(OutcomeException):
    """A call that did not complete: timeout, crash, protocol violation,
    failed start. A pytest outcome but not ``Failed`` (which Hypothesis
    catches to replay and shrink): Hypothesis lets it through at once, pytest
    reports the test failed with this message, and the plugin reports
    ``fault`` with it."""

    def __init__(self, fault: Fault, message: str):
        super().__init__(message, pytrace=False)
        self.fault = fault


class RepeatedFailure(OutcomeException):
    """The implementation raised the same exception on REPEAT_LIMIT inputs of
    one test: the test fails with that first failure at once, without calling
    the function on the rest of its examples (Hypothesis lets a pytest
    outcome through without shrinking it further)."""


class NotImplementedByAdapter(Exception):
    """An adapter function that is absent or raises NotImplementedError."""

    def __init__(self, name: str, extended: bool, detail: str = "", said: str = ""):
        """``said``: why it is absent in the curriculum's own words (gpt2: the
        book's name that is not there), said instead of lmspec's function name."""
        self.name = name
        self.extended = extended
        kind = "not provided" if extended else "not implemented"
        if said:
            super().__init__(f"{kind}: {said}")
        else:
            super().__init__(f"{kind}: {name}" + (f" ({detail})" if detail else ""))


class SubmissionError(Exception):
    """An exception raised by the implementation, as the worker described it."""

    remote_type = ""
    remote_traceback = ""


_EXCEPTION_TYPES: dict[tuple[str, str], type] = {}
_SAFE_BASES = {
    c.__name__: c
    for c in (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        LookupError,
        RuntimeError,
        AssertionError,
        AttributeError,
        ArithmeticError,
        ZeroDivisionError,
        OverflowError,
        MemoryError,
        OSError,
        FileNotFoundError,
        ImportError,
        ModuleNotFoundError,
        UnicodeError,
        UnicodeDecodeError,
        UnicodeEncodeError,
        NotImplementedError,
        RecursionError,
    )
}


def remote_exception(err: dict[str, Any], memory_gb: float | None) -> SubmissionError:
    """A judge-side exception for the worker's description: a SubmissionError
    that also derives from the builtin classes the original derived from (so
    ``pytest.raises(ValueError)`` still works), never a BaseException that
    would stop the judge (SystemExit, KeyboardInterrupt)."""
    name = str(err.get("type", "Exception"))
    bases = tuple(_SAFE_BASES[b] for b in err.get("bases") or [] if b in _SAFE_BASES)
    bases = tuple(b for b in bases if not any(b is not o and issubclass(o, b) for o in bases))
    key = (name, ",".join(b.__name__ for b in bases))
    cls = _EXCEPTION_TYPES.get(key)
    if cls is None:
        label = name if name.isidentifier() else "SubmissionError"
        namespace = {"__module__": "submission"}  # pytest shows "submission.ValueError: ..."
        try:
            cls = type(label, (SubmissionError, *bases), namespace)
        except TypeError:  # incompatible layouts (e.g. two OSError children)
            cls = type(label, (SubmissionError,), namespace)
        _EXCEPTION_TYPES[key] = cls
    message = str(err.get("message", ""))
    text = message
    if name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
        text = f"{name}({message}) raised inside {err.get('in')}"
    if memory_gb and (name == "MemoryError" or "can't allocate memory" in message or "Unable to allocate" in message):
        text = f"memory limit exceeded (--memory-limit {memory_gb:g} GB): {text}"
    tb = str(err.get("traceback") or "")
    exc = cls.__new__(cls)
    Exception.__init__(exc, text + (f"\n--- in the implementation ---\n{tb.rstrip()}" if tb else ""))
    exc.remote_type = name
    exc.remote_traceback = tb
    return exc


class FaultRegistry:
    """Functions that timed out or crashed, shared by the judge processes of
    one session through a file (one JSON line per event)."""

    def __init__(self, folder: Path | None):
        self.path = folder / "faults.jsonl" if folder is not None else None
        self.local: list[dict[str, Any]] = []

    def add(self, key: str, fault: Fault, detail: str) -> None:
        event = {"key": key, "fault": str(fault), "detail": detail}
        self.local.append(event)
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(event) + "\n")

    def events(self, key: str) -> list[dict[str, Any]]:
        events = self.local
        if self.path is not None and self.path.exists():
            events = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        return [e for e in events if e.get("key") == key]

    def check(self, key: str) -> None:
        """Raise the fault that keeps ``key`` from being called again, if any."""
        __tracebackhide__ = True
        events = self.events(key)
        for event in events:
            if event["fault"] == Fault.TIMEOUT:
                raise WorkerFault(
                    Fault.TIMEOUT, f"Timeout: not called: {key} timed out earlier in this grade ({event['detail']})"
                )
        crashes = [e for e in events if e["fault"] == Fault.CRASH]
        if len(crashes) >= CRASH_LIMIT:
            raise WorkerFault(
                Fault.CRASH, f"crashed: not called: {key} crashed the worker {len(crashes)} times in this grade"
            )


class RepeatCounter:
    """Identical failures of a function within the current test."""

    def __init__(self) -> None:
        self.test = ""
        self._seen: dict[tuple[str, str, str], tuple[SubmissionError, int]] = {}
        self._paused = 0

    def begin(self, nodeid: str) -> None:
        """A new test starts: its counts start from zero."""
        self.test = nodeid
        self._seen.clear()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Calls whose exception the test expects and handles itself (a
        reference value taken from another of the implementation's functions,
        which may fail on inputs this test then avoids) are not counted."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def count(self, key: str, err: dict[str, Any], exc: SubmissionError) -> None:
        """After REPEAT_LIMIT identical failures of ``key`` in this test, end it."""
        if self._paused:
            return
        signature = (key, str(err.get("type")), str(err.get("message", "")).split("\n", 1)[0][:300])
        first, count = self._seen.get(signature, (exc, 0))
        self._seen[signature] = (first, count + 1)
        if count + 1 >= REPEAT_LIMIT:
            raise RepeatedFailure(
                f"{first.remote_type}: {first}\n(the same failure on {count + 1} inputs of this test; "
                f"{key} was not called on the rest)",
                pytrace=False,
            )
