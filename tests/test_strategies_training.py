"""Self-tests of the §3/§4 strategies, oracles and statistics the conformance
tests rely on (conformance/cs336/strategies/training.py, oracles/training.py, stats.py)."""

import itertools
import math

import numpy as np
import torch
from hypothesis import given, settings

from lmspec.conformance import stats
from lmspec.conformance.cs336.oracles.training import (
    AdamWHyper,
    adamw_trajectory,
    clipped_grads_formula,
    clipped_grads_torch,
    cosine_lr,
    temperature_softmax64,
    top_p_filter64,
    torch_adamw_trajectory,
)
from lmspec.conformance.cs336.strategies.training import (
    CE_ANY_LEAD,
    MAX_ADAMW_STEPS,
    adamw_runs,
    ce_inputs,
    clip_cases,
    schedules,
    temperature_cases,
    top_p_cases,
)

few = settings(max_examples=15, deadline=None)


@few
@given(case=ce_inputs(), any_case=ce_inputs(lead_dims=CE_ANY_LEAD))
def test_ce_inputs_are_valid(case, any_case):
    """By default the contract's logits (batch, vocab) and (batch, seq, vocab)."""
    assert 1 <= len(case.lead) <= 2 and all(n >= 1 for n in case.lead)
    assert case.vocab >= 2 and 0.1 <= case.scale <= 30.0 + 1e-9
    assert 0 <= len(any_case.lead) <= 3


@few
@given(run=adamw_runs())
def test_adamw_runs_are_valid(run):
    assert 1 <= run.steps <= MAX_ADAMW_STEPS and len(run.grad_present) == run.steps
    assert all(len(row) == run.n_params for row in run.grad_present)
    for h in [run.defaults, *run.group_hypers()]:
        _assert_interior(h)
    init, grads = run.tensors()
    assert [len(ps) for ps in init] == [len(g.shapes) for g in run.groups]
    assert all(p.dtype == torch.float32 for ps in init for p in ps)
    assert all(
        (g is None) == (not present) for row, flags in zip(grads, run.grad_present) for g, present in zip(row, flags)
    )


def _assert_interior(h: AdamWHyper) -> None:
    """SPEC §3: the hyperparameters people train with (issue 19: a MUST test
    drew β1 = 0, which a repository validating 0 < β1 < 1 rejects)."""
    assert 0 < h.lr <= 0.1 + 1e-12, h
    assert 0.5 <= h.beta1 <= 0.99 and 0.9 <= h.beta2 <= 0.9999, h
    assert 1e-10 * (1 - 1e-9) <= h.eps <= 1e-6 * (1 + 1e-9) and 0 <= h.weight_decay <= 0.1, h


@few
@given(run=adamw_runs(per_group="all", schedule=False))
def test_adamw_runs_draw_only_the_contracts_interior(run):
    """Every MUST run, and the per-group STRICT runs too: edges are drawn only
    by ``edges=True`` (test_adamw_edge_hyperparameters)."""
    for h in [run.defaults, *run.group_hypers()]:
        _assert_interior(h)
    lrs = run.lrs() or []
    assert all(0 <= lr <= 0.1 + 1e-12 for row in lrs for lr in row)


@few
@given(run=adamw_runs(edges=True))
def test_adamw_edge_runs_leave_the_interior(run):
    h = run.defaults
    assert (h.beta1 <= 0.5 and h.beta2 <= 0.9) or h.beta2 > 0.9999
    assert h.eps >= 1e-6 * (1 - 1e-9) and h.weight_decay >= 0.1


@few
@given(run=adamw_runs())
def test_adamw_contract_runs_override_only_lr_and_schedule_it(run):
    """MUST runs: a group names its lr only (betas, eps, weight_decay are the
    constructor's), and the test writes a new lr into every group at every step."""
    for g in run.groups:
        assert set(run.group_kwargs(g)) <= {"lr"}
        assert g.hyper._replace(lr=run.defaults.lr) == run.defaults
    lrs = run.lrs()
    assert lrs is not None and len(lrs) == run.steps and all(len(row) == len(run.groups) for row in lrs)
    assert run.max_lr() >= max(lr for row in lrs for lr in row)


@few
@given(run=adamw_runs(per_group="all", schedule=False))
def test_adamw_strict_runs_may_override_every_hyperparameter(run):
    assert run.lrs() is None
    for g in run.groups:
        assert set(run.group_kwargs(g)) in (set(), {"lr", "betas", "eps", "weight_decay"})


@few
@given(sched=schedules())
def test_schedules_are_valid(sched):
    # MUST schedules: a warm-up of at least one iteration (zero warm-up is a
    # STRICT edge), α_min at most half α_max.
    assert 0 <= sched.alpha_min <= 0.5 * sched.alpha_max * (1 + 1e-12) and 1 <= sched.warmup < sched.cycle
    ts = sched.boundary_iters()
    assert {sched.warmup, sched.cycle, sched.cycle + 1} <= set(ts)


@few
@given(case=clip_cases())
def test_clip_cases_have_a_gradient(case):
    assert any(not (f or g) for f, g in zip(case.frozen, case.no_grad))
    assert len(case.shapes) == len(case.frozen) == len(case.no_grad)


@few
@given(case=temperature_cases())
def test_temperature_cases_are_valid(case):
    assert case.temperature > 0 and case.vocab >= 2


@few
@given(case=top_p_cases())
def test_top_p_cases_are_valid(case):
    assert sum(case.weights) > 0 and min(case.weights) >= 0 and 0 < case.top_p <= 1


def test_cosine_oracle_reproduces_spec_example():
    values = [cosine_lr(t, 1.0, 0.1, 7, 21) for t in range(25)]
    assert values[:8] == [t / 7 for t in range(8)]
    assert math.isclose(values[21], 0.1) and values[22:] == [0.1] * 3
    assert all(a >= b for a, b in itertools.pairwise(values[7:22]))


def test_adamw_oracle_torch_form_equals_torch_optim():
    gen = torch.Generator().manual_seed(0)
    hyper = AdamWHyper(1e-2, 0.9, 0.99, 1e-3, 0.1)
    init = [torch.randn(3, 2, generator=gen, dtype=torch.float64)]
    grads = [[torch.randn(3, 2, generator=gen, dtype=torch.float64) * 1e-2] for _ in range(5)]
    ours = adamw_trajectory([(init, hyper)], grads, decay="before", eps_form="torch")
    torch_ = torch_adamw_trajectory([(init, hyper)], grads)
    assert float((ours - torch_).abs().max()) < 1e-14
    spec_form = adamw_trajectory([(init, hyper)], grads, decay="before")
    assert float((spec_form - torch_).abs().max()) > 1e-6  # eps placement matters at this eps


def test_clip_oracles_agree():
    grads = [
        torch.tensor([3.0, 4.0], dtype=torch.float64),
        None,
        torch.tensor([12.0], dtype=torch.float64),
    ]
    a, b = clipped_grads_torch(grads, 1.0), clipped_grads_formula(grads, 1.0)
    assert a[1] is None and b[1] is None
    assert torch.allclose(a[0], b[0], rtol=1e-14) and torch.allclose(a[2], b[2], rtol=1e-14)
    assert math.isclose(float(torch.cat([a[0], a[2]]).norm()), 13 / (13 + 1e-6), rel_tol=1e-12)


def test_top_p_oracle_exact_boundary():
    probs = torch.tensor([0.125, 0.5, 0.0625, 0.25, 0.0625])
    assert top_p_filter64(probs, 0.75).nonzero().flatten().tolist() == [1, 3]
    assert top_p_filter64(probs, 0.76).nonzero().flatten().tolist() == [0, 1, 3]
    assert torch.equal(
        temperature_softmax64(torch.tensor([1.0, 3.0]), 0),
        torch.tensor([0.0, 1.0], dtype=torch.float64),
    )


def test_count_range_bounds_are_chernoff_tails():
    n, p, delta = 8000, 1 / 16, 1e-8
    lo, hi = stats.accepted_count_range(n, p, delta)
    assert lo < n * p < hi
    assert math.exp(-n * stats.kl_bernoulli((hi + 1) / n, p)) <= delta < math.exp(-n * stats.kl_bernoulli(hi / n, p))
    assert math.exp(-n * stats.kl_bernoulli((lo - 1) / n, p)) <= delta < math.exp(-n * stats.kl_bernoulli(lo / n, p))


def test_check_distribution_accepts_uniform_and_rejects_biased():
    rng = np.random.default_rng(0)
    s, n = 16, 8000
    for _ in range(20):  # a correct sampler passes (each run fails with probability ≤ 1e-6)
        counts = np.bincount(rng.integers(0, s, n), minlength=s).tolist()
        assert stats.check_distribution(counts, [1 / s] * s) is None
    rounded = np.rint(rng.random(n) * (s - 1)).astype(int)  # endpoints half as likely
    problem = stats.check_distribution(np.bincount(rounded, minlength=s).tolist(), [1 / s] * s)
    assert problem is not None and ("category 0 " in problem or f"category {s - 1} " in problem)
    assert "probability 0" in stats.check_distribution([5, 3, 1], [0.5, 0.5, 0.0])
