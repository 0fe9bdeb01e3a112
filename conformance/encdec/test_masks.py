"""SPEC §6.2 masks: boolean, True = may attend. Source mask ``(batch, 1,
src_len)`` from ``src != pad_id``; target mask ``(batch, tgt_len, tgt_len)`` =
not padding (on the key axis) AND causal (i sees j ≤ i).

MUST: the source mask exactly; the target mask's rows of non-padding query
positions exactly (the rows of padding queries never reach a non-padding
output: STRICT checks them too).
"""

import pytest
import torch

from lmspec.conformance.asserts import assert_equal, assert_shape
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import confirmed, likely_causes, other

pytestmark = pytest.mark.spec("encdec.masks")
SEEDS = [0, 1, 2]


def _ids(seed: int, lengths: list[int], width: int, pad_id: int, start: bool) -> torch.Tensor:
    ids = c.tokens(c.generator(seed), lengths, width, 23, start=start)
    return torch.where(ids == c.PAD, torch.full_like(ids, pad_id), torch.where(ids == pad_id, 3, ids))


def _bool(mask) -> torch.Tensor:
    return torch.as_tensor(mask).detach().cpu().to(torch.bool)


def _rows(ids: torch.Tensor, pad_id: int, rows: str) -> torch.Tensor | None:
    """The query rows a check compares: those of real (non-padding) tokens, or all (None)."""
    return (ids != pad_id) if rows == "real" else None


def _causes(part: str, run_mask, ids: torch.Tensor, pad_id: int, rows: str, got=None) -> list[str]:
    """The known bugs of the ``part`` mask ("source", "target") whose replay
    equals the implementation's mask (``got``, or a fresh run) on the rows compared."""
    if got is None:
        got = _bool(run_mask(ids.clone(), pad_id))
    keep = _rows(ids, pad_id, rows)
    causes = []
    for cause, replay in KNOWN_BUGS.thunks(f"encdec.masks/{part}", ids, pad_id):
        wrong = replay()
        if got.shape == wrong.shape and (
            torch.equal(got, wrong) if keep is None else torch.equal(got[keep], wrong[keep])
        ):
            causes.append(cause)
    return causes


def _second_causes(part: str, run_mask, ids: torch.Tensor, pad_id: int, rows: str):
    """``_causes`` on the second input: other lengths and width, the other padding id."""
    start = part == "target"
    seconds = ((_ids(10, [5, 2, 4], 5, 1 - pad_id, start), 1 - pad_id), (_ids(11, [8, 5, 7], 8, pad_id, start), pad_id))
    second, pad = other((ids, pad_id), *seconds)
    return lambda: _causes(part, run_mask, second, pad, rows)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pad_id", [0, 1])
def test_source_mask(run_source_mask, seed, pad_id):
    """``src != pad_id`` as (batch, 1, src_len)."""
    src = _ids(seed, [7, 4, 5], 7, pad_id, start=False)
    mask = run_source_mask(src=src.clone(), pad_id=pad_id)
    assert_shape(mask, (3, 1, 7), rule="source mask is (batch, 1, src_len)")
    expected = (src != pad_id).unsqueeze(-2)
    got = _bool(mask)
    if not torch.equal(got, expected):
        run = lambda ids, pad: run_source_mask(src=ids, pad_id=pad)
        causes = confirmed(
            _causes("source", run, src, pad_id, "all", got), _second_causes("source", run, src, pad_id, "all")
        )
        if causes:
            raise AssertionError("source mask: True must mean 'may attend' (a real token)" + likely_causes(causes))
    assert_equal(got, expected, rule="source mask = src != pad_id", context=f"src={src.tolist()}, pad_id={pad_id}")


def _check_target(run_target_mask, seed: int, pad_id: int, rows: str) -> None:
    __tracebackhide__ = True
    tgt = _ids(seed, [6, 3, 5], 6, pad_id, start=True)
    mask = run_target_mask(tgt=tgt.clone(), pad_id=pad_id)
    assert_shape(mask, (3, 6, 6), rule="target mask is (batch, tgt_len, tgt_len)")
    n = tgt.shape[-1]
    expected = (tgt != pad_id).unsqueeze(-2) & torch.ones(n, n, dtype=torch.bool).tril()
    got = _bool(mask)
    keep = (tgt != pad_id) if rows == "real" else torch.ones_like(tgt, dtype=torch.bool)
    if torch.equal(got[keep], expected[keep]):
        return
    run = lambda ids, pad: run_target_mask(tgt=ids, pad_id=pad)
    causes = confirmed(_causes("target", run, tgt, pad_id, rows, got), _second_causes("target", run, tgt, pad_id, rows))
    where = (got != expected) & keep.unsqueeze(-1)
    b, i, j = (int(v) for v in where.nonzero()[0])
    raise AssertionError(
        f"target mask = (tgt != pad_id) on keys AND j ≤ i: at batch {b}, query {i}, key {j} got "
        f"{bool(got[b, i, j])}, expected {bool(expected[b, i, j])}"
        + likely_causes(causes)
        + f"\n  input: tgt={tgt.tolist()}, pad_id={pad_id}"
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pad_id", [0, 1])
def test_target_mask(run_target_mask, seed, pad_id):
    """Rows of non-padding queries: query i sees the non-padding keys j ≤ i."""
    _check_target(run_target_mask, seed, pad_id, "real")


@pytest.mark.strict
@pytest.mark.parametrize("seed", SEEDS)
def test_target_mask_padding_rows(run_target_mask, seed):
    """STRICT: the rows of padding queries follow the same rule (key padding AND causal)."""
    _check_target(run_target_mask, seed, 0, "all")
