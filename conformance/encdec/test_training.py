"""SPEC §6.2 the learning-rate rule and label smoothing.

Rate: factor · d_model^−0.5 · min(step^−0.5, step · warmup^−1.5), step 0
treated as 1 (the rule is evaluated there by the annotated notes' scheduler
as it starts). Label smoothing: the float64 formula of the declared
distribution and loss; the mean over non-padding rows. An implementation
that outputs log-probabilities (declared) is given log-probabilities.
"""

import pytest
import torch

from lmspec.conformance.asserts import assert_close
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import conventions  # noqa: F401  (fixture)


@pytest.mark.spec("encdec.rate")
@pytest.mark.parametrize("step", [0, 1, 100, 3999, 4000, 4001, 20000])
@pytest.mark.parametrize(("d_model", "factor", "warmup"), [(512, 1.0, 4000), (256, 2.0, 400)])
def test_rate(run_rate, step, d_model, factor, warmup):
    rate = run_rate(step=step, d_model=d_model, factor=factor, warmup=warmup)
    hints = [
        ("step 0 not treated as 1", lambda: 0.0),
        (
            "warmup exponent -0.5 instead of -1.5",
            lambda: factor * d_model**-0.5 * min(max(step, 1) ** -0.5, max(step, 1) * warmup**-0.5),
        ),
        ("d_model^-0.5 missing", lambda: factor * min(max(step, 1) ** -0.5, max(step, 1) * warmup**-1.5)),
    ]
    assert_close(
        torch.tensor(float(rate)),
        torch.tensor(o.rate(step, d_model, factor, warmup), dtype=torch.float64),
        c.TOL_SCALAR,
        rule="rate = factor · d_model^−0.5 · min(step^−0.5, step · warmup^−1.5), step 0 as 1",
        hints=hints,
        context=f"step={step}, d_model={d_model}, factor={factor}, warmup={warmup}",
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


def _with_pad_mass(logits, target, smoothing, pad_id, conv):
    """Replay: the annotated distribution without zeroing the padding class (ε / (V − 2) on it too)."""
    vocab = logits.shape[-1]
    log_p = torch.log_softmax(o.f64(logits), dim=-1)
    keep = target != pad_id
    q = torch.full((int(keep.sum()), vocab), smoothing / (vocab - 2), dtype=torch.float64)
    q.scatter_(1, target[keep].unsqueeze(1), 1 - smoothing)
    rows = -(q * log_p[keep]).sum(-1)
    if conv.smoothing_loss == "kl":
        rows = rows + torch.xlogy(q, q).sum(-1)
    return rows.mean()


@pytest.mark.spec("encdec.label_smoothing")
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("smoothing", "pad_id"), [(0.1, 0), (0.2, 2)])
def test_label_smoothing_loss(run_label_smoothing_loss, conventions, seed, smoothing, pad_id):  # noqa: F811
    """(rows, vocab) scores and (rows,) targets with some padding rows."""
    logits, target = _smoothing_case(seed, pad_id=pad_id)
    loss = run_label_smoothing_loss(
        logits=_inputs(logits, conventions), target=target.clone(), smoothing=smoothing, pad_id=pad_id
    )
    hints = [
        (why, lambda alt=alt: o.label_smoothing_loss(logits, target, smoothing, pad_id, alt))
        for why, alt in conventions.alternatives("label_smoothing", "smoothing_loss")
    ]
    hints += [
        (
            "padding rows counted in the mean",
            lambda: o.label_smoothing_loss(logits, target, smoothing, pad_id, conventions, count_pad=True),
        ),
        ("smoothing mass on the padding class", lambda: _with_pad_mass(logits, target, smoothing, pad_id, conventions)),
        (
            "summed over rows instead of the mean",
            lambda: o.label_smoothing_loss(logits, target, smoothing, pad_id, conventions) * (target != pad_id).sum(),
        ),
    ]
    assert_close(
        torch.as_tensor(loss).detach().reshape(()),
        o.label_smoothing_loss(logits, target, smoothing, pad_id, conventions),
        c.TOL_SCALAR,
        rule=f"label-smoothed loss (declared label_smoothing={conventions.label_smoothing!r}, "
        f"smoothing_loss={conventions.smoothing_loss!r}), mean over non-padding rows",
        hints=hints,
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
