"""Likely causes ("hints") of a failure: the known bugs of a spec item, replayed.

A hint names a bug only where replaying that bug reproduces what the
implementation gave, on the failing input AND on a second input of the same
test (one input can look like several bugs: a trainer that splits pre-tokens
at byte ranges once looked like "the stopping test is off by one").

Where they live: the known bugs of an item are registered next to the item's
oracle, in its oracle module, in one ``KnownBugs`` registry per module::

    KNOWN_BUGS = KnownBugs()

    @KNOWN_BUGS.register("3.cosine_schedule", "warmup off by one: α_max·(t+1)/T_w")
    def _warmup_ahead(t, a_max, a_min, tw, tc): ...

A replay takes the same inputs as the item's oracle and returns what the bug
gives. A test asks the registry for its item's replays on its input
(:meth:`KnownBugs.thunks`, the (cause, thunk) pairs ``assert_close`` takes)
and gives ``assert_close`` the same check on its second input (``again``):
one function runs the implementation on a case and returns its output with
the replays on that case, called on the failing case and on the second::

    def _observed(run_rmsnorm, device, case):
        x, g, eps = case
        return run_rmsnorm(...), KNOWN_BUGS.thunks("2.rmsnorm", x, g, eps)

    out, bugs = _observed(run_rmsnorm, device, case)
    second = other(case, SECOND_A, SECOND_B)
    assert_close(out, oracle.rmsnorm(x, g, eps), tol, rule=..., hints=bugs,
                 again=lambda: _observed(run_rmsnorm, device, second))

A second input is pinned beside its test, from the interior of the contract,
with shapes that tell the item's known bugs apart (a causal mask's bugs look
alike on two tokens). Tests that compare in another way keep only the causes
:func:`confirmed` confirms and pass them as ``causes=``.
"""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import pytest
import torch
from hypothesis.control import current_build_context, currently_in_test_context


class KnownBug(NamedTuple):
    item: str  # the spec item whose tests may name it
    cause: str  # shown as "likely cause: ..."
    replay: Callable[..., Any]  # the oracle's inputs -> what the bug gives


class KnownBugs:
    """The known bugs of one oracle module's items, in registration order."""

    def __init__(self) -> None:
        self._bugs: list[KnownBug] = []

    def register(self, item: str, cause: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: ``replay`` is a known bug of ``item``."""

        def add(replay: Callable[..., Any]) -> Callable[..., Any]:
            self.add(item, cause, replay)
            return replay

        return add

    def add(self, item: str, cause: str, replay: Callable[..., Any]) -> None:
        if any(b.item == item and b.cause == cause for b in self._bugs):
            raise ValueError(f"{item}: known bug registered twice: {cause}")
        self._bugs.append(KnownBug(item, cause, replay))

    def of(self, item: str) -> list[KnownBug]:
        return [b for b in self._bugs if b.item == item]

    def causes(self, item: str) -> dict[str, Callable[..., Any]]:
        """cause -> replay, for ``item``."""
        return {b.cause: b.replay for b in self.of(item)}

    def thunks(self, item: str, *args: Any, **kwargs: Any) -> list[tuple[str, Callable[[], Any]]]:
        """(cause, thunk) pairs: each thunk replays its bug on these inputs."""
        return [(b.cause, lambda r=b.replay: r(*args, **kwargs)) for b in self.of(item)]

    def __iter__(self):
        return iter(self._bugs)


#: What a replay or the second input may raise, a cause then being unsure: the
#: implementation failing there, or a guard ending its call (the repeated-failure
#: limit, a skip) — which must not replace the failing input's message.
UNSURE = (Exception, pytest.fail.Exception, pytest.skip.Exception)


def other(first: Any, *seconds: Any) -> Any:
    """The first of ``seconds`` that is not ``first`` (tensors compared by
    value): a test's second input is never its failing input."""
    return next(s for s in seconds if not _same(first, s))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(torch.equal(a.cpu(), b.cpu()))
        )
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):  # state dicts: == would compare tensors
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def reporting() -> bool:
    """False while Hypothesis searches for and shrinks a failing example: it
    throws those runs' messages away and reports the final run's, so hints,
    which replay bugs and run the implementation on a second input, are
    worked out on the final run alone. False too where the judge's
    environment sets ``LMSPEC_HINTS=off``: ``python -m tools.bench.hints``
    measures what hints cost that way (never set by a grading)."""
    if os.environ.get("LMSPEC_HINTS") == "off":
        return False
    return not currently_in_test_context() or current_build_context().is_final


def confirmed(causes: Sequence[str], second: Callable[[], Sequence[str]]) -> list[str]:
    """Of ``causes`` (those whose replay reproduced the failing input's
    output), the ones the test's second input confirms. ``second()`` runs the
    implementation on the second input and returns the causes whose replay
    reproduces its output there; where it raises, nothing is confirmed.

    Where a failing part explains a composite (:func:`part_hints`), that part
    alone is named, the innermost where several do: fixing it comes first."""
    if not causes or not reporting():
        return []
    try:
        again = set(second())
    except UNSURE:
        return []
    kept = [c for c in causes if c in again]
    parts = [c for c in kept if c.startswith(_EXPLAINED_BY)]
    return parts[:1] or kept


def failing_with_causes(check: Callable[[], None], causes: Callable[[], Sequence[str]]) -> None:
    """Run ``check`` (an assertion that compares exactly, without hints); where
    it fails, ``causes()`` (each confirmed on the failing input and on the
    test's second input, e.g. by :func:`confirmed`) go on its message's first
    line. A cause that cannot be worked out names nothing."""
    __tracebackhide__ = True
    try:
        check()
    except AssertionError as failure:
        try:
            named = list(causes()) if reporting() else []
        except UNSURE:
            named = []
        if not named:
            raise
        first, *rest = str(failure).split("\n")
        raise AssertionError("\n".join([first + likely_causes(named), *rest])) from None


# --- composites: a failing part that explains them --------------------------------
_EXPLAINED_BY = "explained by "


def explained_by(item: str) -> str:
    """The cause a composite's failure is given when its failing part explains it."""
    return f"{_EXPLAINED_BY}{item} (fix that first)"


class PartIsRight(ValueError):
    """The implementation's part gives the oracle's composite on this input:
    it cannot explain a failure there."""


def part_hints(
    swaps: Sequence[tuple[str, Callable[[], Any]]], expected: Callable[[], Any], tol: Any
) -> list[tuple[str, Callable[[], Any]]]:
    """(cause, thunk) pairs for a composite (a block, an LM, an MHA, an SDPA):
    each thunk is the oracle's composite with one of the implementation's own
    parts swapped in (``swaps``: (part's item, thunk), innermost first). Where
    that swap reproduces the implementation's output on the failing input and
    on the second, the composite's failure is the part's: ``explained by
    ITEM (fix that first)``. A swap that gives the oracle's composite (within
    ``tol``, a Tolerance, of ``expected()``) raises :class:`PartIsRight`: a
    right part explains nothing, even where the failure is near the bound."""
    cache: list[Any] = []

    def oracle() -> torch.Tensor:
        if not cache:
            cache.append(torch.as_tensor(expected()).detach().to("cpu", torch.float64))
        return cache[0]

    def swapped(item: str, run: Callable[[], Any]) -> Callable[[], Any]:
        def thunk() -> Any:
            got = torch.as_tensor(run()).detach().to("cpu", torch.float64)
            want = oracle()
            if got.shape == want.shape and _within(got, want, tol):
                raise PartIsRight(f"{item} gives the oracle's composite here")
            return got

        return thunk

    return [(explained_by(item), swapped(item, run)) for item, run in swaps]


def _within(got: torch.Tensor, want: torch.Tensor, tol: Any) -> bool:
    close = (got - want).abs() <= tol.atol + tol.rtol * want.abs()
    return bool((close | (got == want) | (got.isnan() & want.isnan())).all())


# --- how causes are written: one, or an ambiguous few -------------------------------
_CAUSE, _OR = "; likely cause: ", "; or equally: "
#: What a failure says where no cause is named (conformance/asserts.py, before its near miss).
NO_KNOWN_BUG = "; no known bug reproduces it"


def likely_causes(causes: Sequence[str], *, own_line: bool = False) -> str:
    """The text a failure's first line ends with: ``; likely cause: A`` for
    one cause; several (their replays all reproduce the output, on both
    inputs) are one ambiguous finding, never several certainties:
    ``; likely cause: A; or equally: B``. ``own_line``: the same on a line
    of its own (``\n  likely cause: A; or equally: B``), for messages whose
    first line is long (merges, decoded text, id sequences)."""
    if not causes:
        return ""
    return ("\n  " + _CAUSE[2:] if own_line else _CAUSE) + _OR.join(causes)


def named_causes(message: str) -> list[str]:
    """The causes a failure message names: after ``; likely cause: `` on a
    line (:func:`likely_causes`' form), or on a line of its own that starts
    ``likely cause: `` (BPE training's)."""
    named = []
    for line in (message or "").splitlines():
        if _CAUSE in line:
            tail = line.split(_CAUSE, 1)[1]
        elif line.strip().startswith(_CAUSE[2:]):
            tail = line.strip()[len(_CAUSE) - 2 :]
        else:
            continue
        named += [c.strip() for c in tail.split(NO_KNOWN_BUG)[0].split(_OR)]
    return named
