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

pytestmark = pytest.mark.spec("encdec.masks")
SEEDS = [0, 1, 2]


def _ids(seed: int, lengths: list[int], width: int, pad_id: int, start: bool) -> torch.Tensor:
    ids = c.tokens(c.generator(seed), lengths, width, 23, start=start)
    return torch.where(ids == c.PAD, torch.full_like(ids, pad_id), torch.where(ids == pad_id, 3, ids))


def _bool(mask) -> torch.Tensor:
    return torch.as_tensor(mask).detach().cpu().to(torch.bool)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pad_id", [0, 1])
def test_source_mask(run_source_mask, seed, pad_id):
    """``src != pad_id`` as (batch, 1, src_len)."""
    src = _ids(seed, [7, 4, 5], 7, pad_id, start=False)
    mask = run_source_mask(src=src.clone(), pad_id=pad_id)
    assert_shape(mask, (3, 1, 7), rule="source mask is (batch, 1, src_len)")
    expected = (src != pad_id).unsqueeze(-2)
    got = _bool(mask)
    if bool((got == ~expected).all()):
        raise AssertionError("source mask: True must mean 'may attend' (a real token); likely cause: polarity inverted")
    assert_equal(got, expected, rule="source mask = src != pad_id", context=f"src={src.tolist()}, pad_id={pad_id}")


def _target_hints(tgt: torch.Tensor, pad_id: int) -> list[tuple[str, torch.Tensor]]:
    n = tgt.shape[-1]
    keys = (tgt != pad_id).unsqueeze(-2)
    tril = torch.ones(n, n, dtype=torch.bool).tril()
    return [
        ("causal mask excludes the diagonal (j < i instead of j ≤ i)", keys & tril.tril(-1)),
        ("causal mask off by one (j ≤ i + 1)", keys & torch.ones(n, n, dtype=torch.bool).tril(1)),
        ("padding on the query axis instead of the key axis", (tgt != pad_id).unsqueeze(-1) & tril),
        ("polarity inverted (True must mean 'may attend')", ~(keys & tril)),
        ("padding ignored (causal only)", tril.expand(tgt.shape[0], n, n)),
        ("not causal (padding only)", keys.expand(tgt.shape[0], n, n)),
    ]


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
    causes = [why for why, wrong in _target_hints(tgt, pad_id) if torch.equal(got[keep], wrong[keep])]
    where = (got != expected) & keep.unsqueeze(-1)
    b, i, j = (int(v) for v in where.nonzero()[0])
    raise AssertionError(
        f"target mask = (tgt != pad_id) on keys AND j ≤ i: at batch {b}, query {i}, key {j} got "
        f"{bool(got[b, i, j])}, expected {bool(expected[b, i, j])}"
        + "".join(f"; likely cause: {why}" for why in causes)
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
