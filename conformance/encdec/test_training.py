"""SPEC §6.2 the learning-rate rule and label smoothing.

Rate: factor · d_model^−0.5 · min(step^−0.5, step · warmup^−1.5) for
step ≥ 1 (MUST). Step 0, where the formula is undefined (0^−0.5), is STRICT:
taken as 1 (the annotated notes' scheduler evaluates it as it starts); an
exception there is that test's finding, with its likely cause. Label smoothing: the float64 formula of the declared
distribution and loss; the mean over non-padding rows. An implementation
that outputs log-probabilities (declared) is given log-probabilities.
"""

import pytest
import torch

from lmspec.conformance.asserts import assert_close
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import conventions  # noqa: F401  (fixture)
from lmspec.conformance.encdec.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import other


def _observed_rates(run_rate, steps, d_model, factor, warmup):
    """The implementation's rates at ``steps``, and the known bugs' replays there."""
    rates = torch.tensor([float(run_rate(step=s, d_model=d_model, factor=factor, warmup=warmup)) for s in steps])
    replays = [
        (cause, lambda f=f: torch.tensor([f(s, d_model, factor, warmup) for s in steps], dtype=torch.float64))
        for cause, f in KNOWN_BUGS.causes("encdec.rate").items()
    ]
    return rates, replays


#: The second input of the rate test: a whole schedule, from step 1 through
#: the warmup to the decay (never step 0: STRICT) (one step can look like several bugs: at step 100
#: of a warmup of 4000, the max of the two terms and a warmup exponent of −0.5
#: give the same rate).
SECOND_RATES = ((1, 5, 300, 999, 1000, 1001, 30000), 1024, 0.5, 1000)


@pytest.mark.spec("encdec.rate")
@pytest.mark.parametrize("step", [1, 100, 3999, 4000, 4001, 20000])
@pytest.mark.parametrize(("d_model", "factor", "warmup"), [(512, 1.0, 4000), (256, 2.0, 400)])
def test_rate(run_rate, step, d_model, factor, warmup):
    rate, bugs = _observed_rates(run_rate, [step], d_model, factor, warmup)
    assert_close(
        rate,
        torch.tensor([o.rate(step, d_model, factor, warmup)], dtype=torch.float64),
        c.TOL_RATE,
        rule="rate = factor · d_model^−0.5 · min(step^−0.5, step · warmup^−1.5)",
        hints=bugs,
        again=lambda: _observed_rates(run_rate, *SECOND_RATES),
        context=f"step={step}, d_model={d_model}, factor={factor}, warmup={warmup}",
    )


#: the cause an exception at step 0 is given when it comes back on a second input
STEP_ZERO_RAISES = (
    "the formula evaluated at step 0 (0^−0.5 is undefined): the annotated notes' rate takes step 0 as 1 "
    "(`step = max(step, 1)`)"
)
#: the step-0 cases: the test's and its second input
STEP_ZERO = ((512, 1.0, 4000), (256, 2.0, 400))


def _raised_at_zero(run_rate, d_model, factor, warmup) -> ArithmeticError | None:
    """The exception the implementation raises at step 0 (None when it returns)."""
    try:
        run_rate(step=0, d_model=d_model, factor=factor, warmup=warmup)
    except ArithmeticError as exc:  # ZeroDivisionError: 0.0 cannot be raised to a negative power
        return exc
    return None


@pytest.mark.spec("encdec.rate")
@pytest.mark.strict
def test_rate_step_zero(run_rate):
    """STRICT: step 0 is taken as 1 (the formula is undefined there; the
    annotated notes' scheduler starts there)."""
    d_model, factor, warmup = STEP_ZERO[0]
    raised = _raised_at_zero(run_rate, d_model, factor, warmup)
    if raised is not None:
        again = _raised_at_zero(run_rate, *STEP_ZERO[1])
        cause = f"; likely cause: {STEP_ZERO_RAISES}" if isinstance(again, type(raised)) else ""
        pytest.fail(
            f"rate at step 0 (taken as 1, STRICT) raised {type(raised).__name__}: {str(raised).splitlines()[0]}"
            f"{cause}\n  input: step=0, d_model={d_model}, factor={factor}, warmup={warmup}",
            pytrace=False,
        )
    rates, bugs = _observed_rates(run_rate, [0], d_model, factor, warmup)
    assert_close(
        rates,
        torch.tensor([o.rate(0, d_model, factor, warmup)], dtype=torch.float64),
        c.TOL_RATE,
        rule="rate at step 0 = rate at step 1 (STRICT: the formula starts at step 1)",
        hints=bugs,
        again=lambda: _observed_rates(run_rate, [0], *STEP_ZERO[1]),
        context=f"step=0, d_model={d_model}, factor={factor}, warmup={warmup}",
    )


def _smoothing_case(seed: int, rows: int = 12, vocab: int = 11, pad_id: int = 0):
    g = c.generator(700 + seed)
    logits = c.randn(g, rows, vocab, std=2.0)
    target = torch.randint(1, vocab, (rows,), generator=g)
    target[torch.randperm(rows, generator=g)[:3]] = pad_id
    if pad_id != 0:
        target[target == pad_id] = pad_id
    return logits, target


def _inputs(logits, conv):
    return torch.log_softmax(logits, dim=-1) if conv.output == "log_probs" else logits.clone()


def _observed_smoothing(run_label_smoothing_loss, case, conv):
    """The implementation's loss on ``case`` (logits, target, smoothing,
    pad_id), and the known bugs' replays there."""
    logits, target, smoothing, pad_id = case
    loss = run_label_smoothing_loss(
        logits=_inputs(logits, conv), target=target.clone(), smoothing=smoothing, pad_id=pad_id
    )
    return torch.as_tensor(loss).detach().reshape(()), KNOWN_BUGS.thunks("encdec.label_smoothing", *case, conv)


# Second inputs: another vocabulary, smoothing and padding id, 16 rows.
SECOND_SMOOTHING = (
    (*_smoothing_case(5, rows=16, vocab=9, pad_id=1), 0.15, 1),
    (*_smoothing_case(6, rows=16, vocab=13, pad_id=0), 0.05, 0),
)


@pytest.mark.spec("encdec.label_smoothing")
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("smoothing", "pad_id"), [(0.1, 0), (0.2, 2)])
def test_label_smoothing_loss(run_label_smoothing_loss, conventions, seed, smoothing, pad_id):  # noqa: F811
    """(rows, vocab) scores and (rows,) targets with some padding rows."""
    case = (*_smoothing_case(seed, pad_id=pad_id), smoothing, pad_id)
    logits, target, _, _ = case
    loss, bugs = _observed_smoothing(run_label_smoothing_loss, case, conventions)
    assert_close(
        loss,
        o.label_smoothing_loss(*case, conventions),
        c.TOL_SCALAR,
        rule=f"label-smoothed loss (declared label_smoothing={conventions.label_smoothing!r}, "
        f"smoothing_loss={conventions.smoothing_loss!r}), mean over non-padding rows",
        hints=bugs,
        again=lambda: _observed_smoothing(run_label_smoothing_loss, other(case, *SECOND_SMOOTHING), conventions),
        context=f"smoothing={smoothing}, pad_id={pad_id}, target={target.tolist()}, vocab {logits.shape[-1]}",
    )


@pytest.mark.spec("encdec.label_smoothing")
@pytest.mark.strict
def test_label_smoothing_loss_batched(run_label_smoothing_loss, conventions):  # noqa: F811
    """STRICT: (batch, len, vocab) scores with (batch, len) targets give the same loss."""
    logits, target = _smoothing_case(0)
    loss = run_label_smoothing_loss(
        logits=_inputs(logits, conventions).view(3, 4, -1), target=target.view(3, 4), smoothing=0.1, pad_id=0
    )
    assert_close(
        torch.as_tensor(loss).detach().reshape(()),
        o.label_smoothing_loss(logits, target, 0.1, 0, conventions),
        c.TOL_SCALAR,
        rule="label smoothing over (batch, len, vocab)",
    )
