"""Near misses: where no known bug reproduces a failing output, what about it
is right and what is not, in the quantities the suite can tell on this one
output (``assert_close(..., near=...)``): the scale, the positions that are
still right, whether rows sum to one. Facts measured on the output, never a
cause: "values differ from position 2 on" says where to look, not why.

A check is ``(actual, expected, tol) -> text or None`` on float64 CPU
tensors of the same shape; :func:`describe` joins the texts of a test's
checks, skipping those that do not apply.
"""

from collections.abc import Callable, Sequence

import torch

Check = Callable[[torch.Tensor, torch.Tensor, object], str | None]

#: An output whose RMS is within this factor of the expected RMS has its scale right.
SCALE_FACTOR = 1.1


def _outside(actual: torch.Tensor, expected: torch.Tensor, tol) -> torch.Tensor:
    bound = tol.atol + tol.rtol * expected.abs()
    return ~(((actual - expected).abs() <= bound) | (actual == expected) | (actual.isnan() & expected.isnan()))


def scale(actual: torch.Tensor, expected: torch.Tensor, tol) -> str | None:
    """``scale right`` (RMS within 10% of the expected RMS) or ``scale ×r``."""
    if not (actual.isfinite().all() and expected.isfinite().all()) or actual.numel() == 0:
        return None
    want = expected.square().mean().sqrt().item()
    got = actual.square().mean().sqrt().item()
    if want == 0.0:
        return None
    ratio = got / want
    if 1 / SCALE_FACTOR <= ratio <= SCALE_FACTOR:
        return "scale right"
    return f"scale ×{ratio:.3g} of the expected"


def positions(axis: int = -2, name: str = "position") -> Check:
    """Which positions along ``axis`` (the sequence) are right: ``values
    differ from position k on`` (0..k-1 right), ``values differ at position
    k only``, or ``values differ at every position``."""

    def check(actual: torch.Tensor, expected: torch.Tensor, tol) -> str | None:
        if actual.dim() == 0 or actual.shape[axis] < 2:
            return None
        bad = _outside(actual, expected, tol).movedim(axis, 0).flatten(1).any(1)
        wrong = [int(i) for i in bad.nonzero().flatten()]
        if not wrong:
            return None
        if len(wrong) == bad.numel():
            return f"values differ at every {name}"
        first = wrong[0]
        if wrong == list(range(first, bad.numel())):
            return f"values right before {name} {first}, differ from {name} {first} on"
        if len(wrong) == 1:
            return f"values differ at {name} {first} only"
        return f"values differ at {name}s {', '.join(map(str, wrong[:6]))}{'...' if len(wrong) > 6 else ''}"

    return check


def sums_to_one(dim: int = -1) -> Check:
    """``rows sum to 1: yes/no`` along ``dim`` (a softmax, attention weights)."""

    def check(actual: torch.Tensor, expected: torch.Tensor, tol) -> str | None:
        if actual.dim() == 0 or not actual.isfinite().all():
            return None
        sums = actual.sum(dim)
        ok = bool(((sums - 1).abs() <= tol.atol + tol.rtol).all())
        return f"sums to 1 along dim {dim}: {'yes' if ok else 'no'}"

    return check


def zeros(actual: torch.Tensor, expected: torch.Tensor, tol) -> str | None:
    """``zeros right`` (exactly 0 where the expected is 0 and nowhere else: a
    filtered distribution's support, masked weights) or how many entries differ."""
    if actual.dim() == 0 or not bool((expected == 0).any()):
        return None
    differ = int(((actual == 0) != (expected == 0)).sum())
    return "zeros right" if differ == 0 else f"zeros wrong at {differ} of {expected.numel()} entries"


def describe(actual: torch.Tensor, expected: torch.Tensor, tol, checks: Sequence[Check]) -> str:
    """The facts of ``checks`` that apply, joined: "" when none does."""
    facts = []
    for check in checks:
        try:
            fact = check(actual, expected, tol)
        except (RuntimeError, IndexError, ValueError):  # a shape a check cannot read: no fact
            continue
        if fact:
            facts.append(fact)
    return ", ".join(facts)
