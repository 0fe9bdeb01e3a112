"""SPEC §6.1 calc_loss_batch and calc_loss_loader against ``F.cross_entropy``
of the float64 oracle model's logits."""

import math

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lmspec.conformance.asserts import assert_close
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.gpt2.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import other
from lmspec.conformance.tolerances import Tolerance

TOL = Tolerance(1e-5, 1e-5, "float32 logits and cross-entropy vs float64")


def _batches(seed: int, n: int, c):
    g = sg.generator(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(0, c["vocab_size"], (2, 6), generator=g)
        out.append((ids, torch.randint(0, c["vocab_size"], (2, 6), generator=g)))
    return out


def _setup(seed: int, n: int, batch_seed: int):
    """The model's config and weights of ``seed``, ``n`` batches of ``batch_seed``
    and the oracle's (logits, targets) of each batch."""
    c = o.cfg(context=8)
    w = o.model_weights(sg.generator(seed), c)
    batches = _batches(batch_seed, n, c)
    return c, w, batches, [(o.model(x, w, c), y) for x, y in batches]


#: Second inputs of calc_loss_batch (conformance/hints.py): the batch seeds;
#: any batch of 2×6 positions tells the last position's loss from the mean.
SECOND_BATCH_SEEDS = (101, 102)


def _observed_batch(run, setup):
    """calc_loss_batch on the one batch of ``setup`` (``_setup``'s tuple) and the known bugs' replays there."""
    c, w, ((x, y),), scored = setup
    return run(cfg=c, weights=w, input_batch=x, target_batch=y), KNOWN_BUGS.thunks("gpt2.loss", scored, None)


@sg.budget(5)
@pytest.mark.spec("gpt2.loss")
@given(seed=sg.seeds)
def test_calc_loss_batch(gpt2_loss_batch, seed):
    """The mean cross-entropy over every position of the batch."""
    setup = _setup(seed, 1, seed)
    got, bugs = _observed_batch(gpt2_loss_batch, setup)
    ((logits, y),) = setup[-1]
    second = other(seed, *SECOND_BATCH_SEEDS)
    assert_close(
        got,
        o.loss(logits, y),
        TOL,
        rule="calc_loss_batch = mean cross-entropy",
        hints=bugs,
        again=lambda: _observed_batch(gpt2_loss_batch, _setup(second, 1, second)),
    )


#: Second inputs of the loader (conformance/hints.py): (seed, batches,
#: num_batches) with 9 asked of 3 or 2 batches, where dividing by num_batches shows.
SECOND_LOADERS = ((5, 3, 9), (6, 2, 9))


def _observed_loader(run, setup, num):
    """calc_loss_loader on the batches of ``setup`` with ``num_batches`` and the known bugs' replays there."""
    c, w, batches, scored = setup
    got = run(cfg=c, weights=w, batches=batches, num_batches=num)
    return got, KNOWN_BUGS.thunks("gpt2.loss", scored, num)


@sg.budget(6)
@pytest.mark.spec("gpt2.loss")
@given(seed=sg.seeds, n=st.integers(1, 4), num=st.sampled_from([None, 1, 2, 9]))
@example(seed=3, n=2, num=9)  # fewer batches than asked: pinned, not left to a 6-example draw
def test_calc_loss_loader_mean_of_first_batches(gpt2_loss_loader, seed, n, num):
    """The mean of the first ``num_batches`` batch losses (all when None or when fewer are available)."""
    setup = _setup(seed, n, seed + 1)
    got, bugs = _observed_loader(gpt2_loss_loader, setup, num)
    k = n if num is None else min(num, n)
    s_seed, s_n, s_num = other((seed, n, num), *SECOND_LOADERS)
    assert_close(
        got,
        o.loader_loss(setup[-1], num),
        TOL,
        rule=f"mean of the first {k} of {n} batch losses",
        hints=bugs,
        again=lambda: _observed_loader(gpt2_loss_loader, _setup(s_seed, s_n, s_seed + 1), s_num),
    )


@pytest.mark.spec("gpt2.loss")
def test_calc_loss_loader_empty_is_nan(gpt2_loss_loader):
    """An empty loader gives nan."""
    c = o.cfg(context=8)
    got = gpt2_loss_loader(cfg=c, weights=o.model_weights(sg.generator(0), c), batches=[], num_batches=None)
    assert isinstance(got, float) and math.isnan(got), f"an empty loader must give nan, got {got!r}"
