"""SPEC §6.1 calc_loss_batch and calc_loss_loader against ``F.cross_entropy``
of the float64 oracle model's logits."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmspec.conformance.asserts import assert_close
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.tolerances import Tolerance

TOL = Tolerance(1e-5, 1e-5, "float32 logits and cross-entropy vs float64")


def _batches(seed: int, n: int, c):
    g = sg.generator(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(0, c["vocab_size"], (2, 6), generator=g)
        out.append((ids, torch.randint(0, c["vocab_size"], (2, 6), generator=g)))
    return out


@sg.budget(5)
@pytest.mark.spec("gpt2.loss")
@given(seed=sg.seeds)
def test_calc_loss_batch(gpt2_loss_batch, seed):
    """The mean cross-entropy over every position of the batch."""
    c = o.cfg(context=8)
    w = o.model_weights(sg.generator(seed), c)
    ((x, y),) = _batches(seed, 1, c)
    got = gpt2_loss_batch(cfg=c, weights=w, input_batch=x, target_batch=y)
    logits = o.model(x, w, c)
    hints = [("the loss of the last position only", lambda: o.loss(logits[:, -1:], y[:, -1:]))]
    assert_close(got, o.loss(logits, y), TOL, rule="calc_loss_batch = mean cross-entropy", hints=hints)


@sg.budget(6)
@pytest.mark.spec("gpt2.loss")
@given(seed=sg.seeds, n=st.integers(1, 4), num=st.sampled_from([None, 1, 2, 9]))
def test_calc_loss_loader_mean_of_first_batches(gpt2_loss_loader, seed, n, num):
    """The mean of the first ``num_batches`` batch losses (all when None or when fewer are available)."""
    c = o.cfg(context=8)
    w = o.model_weights(sg.generator(seed), c)
    batches = _batches(seed + 1, n, c)
    losses = [o.loss(o.model(x, w, c), y) for x, y in batches]
    k = n if num is None else min(num, n)
    got = gpt2_loss_loader(cfg=c, weights=w, batches=batches, num_batches=num)
    hints = [("divided by num_batches although fewer batches ran", lambda: sum(losses[:k]) / (num or n))]
    assert_close(got, sum(losses[:k]) / k, TOL, rule=f"mean of the first {k} of {n} batch losses", hints=hints)


@pytest.mark.spec("gpt2.loss")
def test_calc_loss_loader_empty_is_nan(gpt2_loss_loader):
    """An empty loader gives nan."""
    c = o.cfg(context=8)
    got = gpt2_loss_loader(cfg=c, weights=o.model_weights(sg.generator(0), c), batches=[], num_batches=None)
    assert isinstance(got, float) and math.isnan(got), f"an empty loader must give nan, got {got!r}"
