"""The suite's assertion vocabulary. Every helper hides itself from the
traceback and says: the rule, what was observed vs expected at the worst
element, the max error, the tolerance, and the likely cause when replaying a
known bug reproduces the output on this input and on a second one
(``hints`` and ``again``, conformance/hints.py)."""

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from lmspec.conformance import near as near_miss
from lmspec.conformance.hints import NO_KNOWN_BUG, UNSURE, confirmed, likely_causes, reporting
from lmspec.conformance.tolerances import Tolerance

# Taken before any implementation under test is imported, so a submission
# that monkeypatches torch at import time cannot change how we compare.
_as_tensor = torch.as_tensor
_float64 = torch.float64
_no_subclass_dispatch = torch._C.DisableTorchFunctionSubclass

Hint = tuple[str, Callable[[], Any]]
#: The same check on the test's second input: () -> (the implementation's
#: output there, the same known bugs' (cause, thunk) pairs on that input).
Again = Callable[[], tuple[Any, Sequence[Hint]]]


def _to64(x: Any) -> torch.Tensor:
    """A plain float64 CPU copy. Tensor subclasses lose their
    ``__torch_function__`` first, so a returned object cannot fake the
    arithmetic the comparison does on it."""
    if isinstance(x, torch.Tensor):
        with _no_subclass_dispatch():
            plain = x.detach().to("cpu", _float64).clone()
            return plain if type(plain) is torch.Tensor else plain.as_subclass(torch.Tensor)
    return _as_tensor(x, dtype=_float64)


def _fmt_index(idx: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, idx)) + "]"


def _matching_hints(actual: torch.Tensor, hints: Sequence[Hint], tol: Tolerance) -> list[str]:
    found = []
    for cause, make in hints:
        try:
            candidate = _to64(make())
        except UNSURE:  # a hint that cannot be computed is just not shown
            continue
        if candidate.shape == actual.shape and bool(_reproduces(actual, candidate, tol).all()):
            found.append(cause)
    return found


def _reproduces(actual: torch.Tensor, replay: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Elementwise: within ``tol``, or the same infinity, or both NaN (a
    replay of an overflow reproduces the overflow)."""
    close = replay.isfinite() & ((actual - replay).abs() <= tol.atol + tol.rtol * replay.abs())
    return close | (actual == replay) | (actual.isnan() & replay.isnan())


def describe_mismatch(actual: Any, expected: Any, tol: Tolerance) -> str | None:
    """None when ``actual`` is within ``tol`` of ``expected`` everywhere, else
    a description of the worst element."""
    a, e = _to64(actual), _to64(expected)
    if tuple(a.shape) != tuple(e.shape):
        return f"shape {tuple(a.shape)} but expected {tuple(e.shape)}"
    if a.numel() == 0:
        return None
    nan_a, nan_e = a.isnan(), e.isnan()
    if bool((nan_a != nan_e).any()):
        idx = tuple(int(i) for i in (nan_a != nan_e).nonzero()[0])
        return f"NaN mismatch at {_fmt_index(idx)}: got {a[idx].item():.6g}, expected {e[idx].item():.6g}"
    inf_mismatch = (a.isinf() | e.isinf()) & (a != e)
    if bool(inf_mismatch.any()):
        idx = tuple(int(i) for i in inf_mismatch.nonzero()[0])
        return f"infinity mismatch at {_fmt_index(idx)}: got {a[idx].item():.6g}, expected {e[idx].item():.6g}"
    finite = ~(nan_e | e.isinf())
    err = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    bound = tol.atol + tol.rtol * e.abs()
    excess = torch.where(finite, err - bound, torch.full_like(a, -1.0))
    if not bool((excess > 0).any()):
        return None
    flat = int(excess.argmax())
    # numpy's, not torch.unravel_index: torch's checks its arguments through torch._check, whose first call
    # imports torch.fx's symbolic shapes and sympy (over a CPU-second, in every judge that reports a mismatch)
    idx = tuple(int(i) for i in np.unravel_index(flat, tuple(a.shape))) if a.dim() else ()
    n_bad = int((excess > 0).sum())
    return (
        f"max |error| {err.max().item():.3g}; worst at {_fmt_index(idx)}: got {a[idx].item():.8g}, "
        f"expected {e[idx].item():.8g} (error {err[idx].item():.3g}); "
        f"{n_bad}/{a.numel()} elements outside tolerance ({tol})"
    )


def assert_close(
    actual: Any,
    expected: Any,
    tol: Tolerance,
    *,
    rule: str,
    hints: Sequence[Hint] = (),
    again: Again | None = None,
    causes: Sequence[str] = (),
    hint_tol: Tolerance | None = None,
    context: str = "",
    near: Sequence[near_miss.Check] = (),
) -> None:
    """Assert ``actual`` ≈ ``expected`` elementwise (|a-e| <= atol + rtol|e|).

    ``rule`` states the spec rule in a line. ``hints`` are (cause, thunk)
    pairs, each thunk replaying a known bug on this input; a cause is named
    only when its replay reproduces ``actual`` here AND its replay on the
    test's second input reproduces the implementation's output there
    (``again``, required with ``hints``), both within ``hint_tol`` (default
    ``tol``; a bit-exact rule's float64 replays need a float32 one).
    ``causes``: causes the test has already confirmed that way itself.
    ``near``: where no cause is named, the facts of these checks
    (conformance/near.py) are: what about the output is right, and what not.
    """
    __tracebackhide__ = True
    if hints and again is None:
        raise TypeError(f"{rule}: a hint is named only when a second input confirms it: pass again=")
    problem = describe_mismatch(actual, expected, tol)
    if problem is None:
        return
    named = list(causes)
    if hints and not problem.startswith("shape") and reporting():
        within = hint_tol or tol
        named += confirmed(_matching_hints(_to64(actual), hints, within), lambda: _matching_again(again, within))
    # The likely cause goes on the first line: reports show only that line.
    lines = [f"{rule}: {problem}" + likely_causes(named)]
    if near and not named and not problem.startswith("shape") and reporting():
        facts = near_miss.describe(_to64(actual), _to64(expected), tol, near)
        if facts:
            lines[0] += f"{NO_KNOWN_BUG}; near miss: shape right, {facts}"
    if context:
        lines.append(f"  input: {context}")
    raise AssertionError("\n".join(lines))


def _matching_again(again: Again, tol: Tolerance) -> list[str]:
    actual, hints = again()
    return _matching_hints(_to64(actual), hints, tol)


def assert_shape(actual: Any, expected_shape: Sequence[int], *, rule: str) -> None:
    __tracebackhide__ = True
    shape = tuple(getattr(actual, "shape", ()))
    if shape != tuple(expected_shape):
        raise AssertionError(f"{rule}: output shape {shape} but expected {tuple(expected_shape)}")


def assert_dtype(actual: Any, expected: torch.dtype, *, rule: str) -> None:
    __tracebackhide__ = True
    got = getattr(actual, "dtype", type(actual))
    if got != expected:
        raise AssertionError(f"{rule}: output dtype {got} but expected {expected}")


def assert_equal(actual: Any, expected: Any, *, rule: str, context: str = "", causes: Sequence[str] = ()) -> None:
    """Exact equality of plain Python values (lists of ids, merges, ints),
    showing the first difference for sequences; ``causes``: the likely causes
    the test confirmed (hints.confirmed), ending the message's first line."""
    __tracebackhide__ = True
    if _plain(actual) == _plain(expected):
        return
    msg = f"{rule}: got {_short(actual)}, expected {_short(expected)}"
    if _rows(actual) and _rows(expected):
        msg = f"{rule}: {_first_row_difference(actual, expected)}"
    elif isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        first = next(
            (i for i, (x, y) in enumerate(zip(actual, expected)) if x != y),
            min(len(actual), len(expected)),
        )
        got = actual[first] if first < len(actual) else "<end>"
        want = expected[first] if first < len(expected) else "<end>"
        msg = (
            f"{rule}: first difference at index {first}: got {got!r}, expected {want!r} "
            f"(lengths {len(actual)} vs {len(expected)})"
        )
    msg += likely_causes(causes)
    if context:
        msg += f"\n  input: {context}"
    raise AssertionError(msg)


def _rows(x: Any) -> bool:
    """A list of rows of ids (a batch of sequences): compared row by row."""
    return (
        isinstance(x, (list, tuple))
        and bool(x)
        and all(
            isinstance(r, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in r) for r in x
        )
    )


def _first_row_difference(actual: Sequence[Sequence[int]], expected: Sequence[Sequence[int]]) -> str:
    """ "row 1 differs first at position 3: got 7, expected 5 (row 1: got [...],
    expected [...]; lengths 4 vs 5; 2 rows vs 2)"."""
    rows = len(actual), len(expected)
    r = next((i for i, (a, b) in enumerate(zip(actual, expected)) if list(a) != list(b)), min(rows))
    if r == min(rows):
        return f"{rows[0]} rows, expected {rows[1]} (the first {r} agree)"
    a, b = list(actual[r]), list(expected[r])
    p = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    got = repr(a[p]) if p < len(a) else "<end>"
    want = repr(b[p]) if p < len(b) else "<end>"
    return (
        f"row {r} differs first at position {p}: got {got}, expected {want} "
        f"(row {r}: got {_short(a)}, expected {_short(b)}; lengths {len(a)} vs {len(b)}; {rows[0]} rows vs {rows[1]})"
    )


def _plain(x: Any) -> Any:
    """``x`` rebuilt from builtin types (numpy/torch scalars become int/float),
    so a submission's object with a lying ``__eq__`` cannot pass a comparison."""
    if isinstance(x, bool):
        return bool(x)
    if isinstance(x, (str, bytes)):
        return type(x).__mro__[-2](x)  # str(...) / bytes(...): drops subclasses
    if isinstance(x, dict):
        return {_plain(k): _plain(v) for k, v in dict.items(x)}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in (list.__iter__(x) if isinstance(x, list) else tuple.__iter__(x))]
    if isinstance(x, torch.Tensor):
        return _plain(_to64(x).tolist()) if x.is_floating_point() else x.detach().cpu().tolist()
    try:
        return int(operator.index(x))
    except TypeError:
        pass
    if isinstance(x, (float, np.floating)):
        return float(x)
    return x


def _short(x: Any, limit: int = 300) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"
