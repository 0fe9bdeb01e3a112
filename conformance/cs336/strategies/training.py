"""Hypothesis strategies for SPEC §3 (training) and §4 (generation).

Functions return strategies; composites return NamedTuples. Sizes stay small
(the whole suite runs in about a minute on 2 cores): caps are module constants.
"""

import math
from typing import NamedTuple

import torch
from hypothesis import strategies as st
from torch import Tensor

from lmspec.conformance.cs336.oracles.training import AdamWHyper

MAX_LEAD_DIMS = 3
MAX_LEAD_SIZE = 4
MAX_VOCAB = 40
MAX_ADAMW_STEPS = 12
MAX_PARAMS_PER_GROUP = 3
MAX_SCHEDULE_ITERS = 200


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats spread evenly in log space over [lo, hi] (10^U(log lo, log hi))."""
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: float(10.0**e))


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple)


# --- cross-entropy ----------------------------------------------------------------
# Leading (position) dims of the logits: the contract's (batch, vocab) and
# (batch, seq, vocab) (SPEC §3); STRICT tests also draw none and three.
CE_CONTRACT_LEAD = (1, 2)
CE_ANY_LEAD = tuple(range(MAX_LEAD_DIMS + 1))


class CEInput(NamedTuple):
    lead: tuple[int, ...]  # leading (position) dims
    vocab: int
    scale: float  # logits ~ N(0, scale²)
    seed: int


@st.composite
def ce_inputs(
    draw: st.DrawFn,
    *,
    lead_dims: tuple[int, ...] = CE_CONTRACT_LEAD,
    max_vocab: int = MAX_VOCAB,
    max_scale: float = 30.0,
) -> CEInput:
    n = draw(st.sampled_from(lead_dims), label="number of leading dims")
    lead = tuple(draw(st.lists(st.integers(1, MAX_LEAD_SIZE), min_size=n, max_size=n), label="lead"))
    vocab = draw(st.integers(2, max_vocab), label="vocab")
    scale = draw(log_uniform(0.1, max_scale), label="scale")
    return CEInput(lead, vocab, scale, draw(st.integers(0, 2**16), label="seed"))


# --- AdamW --------------------------------------------------------------------------
# MUST tests draw the hyperparameters people train with (SPEC §3): an
# implementation may reject β1 = 0 or eps = 0, as many optimizers do. Edges
# (β1 = 0, β2 far from 1, a large eps or weight decay) are drawn only by
# STRICT tests (``edges=True``).
BETA1_RANGE = (0.5, 0.99)
BETA2_RANGE = (0.9, 0.9999)
EPS_RANGE = (1e-10, 1e-6)
WEIGHT_DECAY_RANGE = (0.0, 0.1)
LR_RANGE = (1e-4, 0.1)  # inside the contract's (0, 0.1]


def adamw_hypers(*, edges: bool = False) -> st.SearchStrategy[AdamWHyper]:
    """AdamW hyperparameters: the contract's interior (the default), or with
    ``edges`` values at and past its boundaries (STRICT tests only)."""
    if edges:
        return st.builds(
            AdamWHyper,
            lr=log_uniform(1e-4, 1.0),
            beta1=st.sampled_from([0.0, 0.1, 0.3]) | st.floats(0.0, 0.5),
            beta2=st.sampled_from([0.5, 0.8, 0.99999]) | st.floats(0.5, 0.9),
            eps=st.sampled_from([1e-3, 1e-4]) | log_uniform(1e-6, 1e-3),
            weight_decay=st.sampled_from([0.2, 0.5]) | st.floats(0.1, 0.5),
        )
    return st.builds(
        AdamWHyper,
        lr=st.sampled_from([1e-3, 3e-4, 1e-2]) | log_uniform(*LR_RANGE),
        beta1=st.sampled_from([0.9, 0.95, 0.5, 0.99]) | st.floats(*BETA1_RANGE),
        beta2=st.sampled_from([0.999, 0.95, 0.99, 0.9, 0.9999]) | st.floats(*BETA2_RANGE),
        eps=st.sampled_from([1e-8, 1e-6, 1e-10]) | log_uniform(*EPS_RANGE),
        weight_decay=st.sampled_from([0.01, 0.0, 0.1]) | st.floats(*WEIGHT_DECAY_RANGE),
    )


class AdamWGroup(NamedTuple):
    shapes: tuple[tuple[int, ...], ...]
    hyper: AdamWHyper
    own_hyper: bool  # False: the group dict names only "params" (constructor's values)


class AdamWRun(NamedTuple):
    defaults: AdamWHyper  # passed to the constructor
    groups: tuple[AdamWGroup, ...]
    steps: int
    grad_scale: float  # gradients ~ N(0, grad_scale²), fixed in advance
    # grad_present[step][param]: False means p.grad is None at that step
    grad_present: tuple[tuple[bool, ...], ...]
    seed: int
    # lr_factors[step][group]: the test sets group["lr"] = hyper.lr × factor
    # before that step (a schedule); all 1.0 for a constant learning rate
    lr_factors: tuple[tuple[float, ...], ...] = ()
    # what a group with own_hyper names: "lr" only (the contract) or "all"
    # four hyperparameters (STRICT)
    per_group: str = "lr"

    @property
    def n_params(self) -> int:
        return sum(len(g.shapes) for g in self.groups)

    def group_hypers(self) -> list[AdamWHyper]:
        return [g.hyper if g.own_hyper else self.defaults for g in self.groups]

    def group_kwargs(self, group: AdamWGroup) -> dict:
        """The hyperparameters the group's dict names (besides "params")."""
        if not group.own_hyper:
            return {}
        return {"lr": group.hyper.lr} if self.per_group == "lr" else group.hyper.as_kwargs()

    def lrs(self) -> list[list[float]] | None:
        """lrs[step][group] written into group["lr"] before each step; None
        when the run keeps the groups' learning rates constant."""
        if not self.lr_factors:
            return None
        return [[h.lr * f for h, f in zip(self.group_hypers(), row)] for row in self.lr_factors]

    def max_lr(self) -> float:
        rows = self.lrs() or [[h.lr for h in self.group_hypers()]]
        return max([self.defaults.lr, *(lr for row in rows for lr in row)])

    def tensors(self, dtype: torch.dtype = torch.float32) -> tuple[list[list[Tensor]], list[list[Tensor | None]]]:
        """Initial parameters per group, and every parameter's gradient at
        every step (fixed in advance; None where ``grad_present`` is False),
        drawn in float64 and rounded to ``dtype`` (the official test trains
        float32 parameters)."""
        gen = torch.Generator().manual_seed(self.seed)
        f64 = torch.float64
        init = [[torch.randn(s, generator=gen, dtype=f64).to(dtype) for s in g.shapes] for g in self.groups]
        shapes = [s for g in self.groups for s in g.shapes]
        grads = [
            [
                (torch.randn(s, generator=gen, dtype=f64) * self.grad_scale).to(dtype) if on else None
                for s, on in zip(shapes, present)
            ]
            for present in self.grad_present
        ]
        return init, grads


# A schedule's lr relative to the group's: warms up, peaks, decays; never
# above the group's own lr, and never 0 in a MUST run (SPEC §3: lr stays in
# the contract's (0, 0.1] at every step; a schedule's first step is taken
# where it is positive). ``zero_lr`` adds the schedule's 0 (its value at t = 0,
# a warm-up from 0): what a step at lr = 0 does is STRICT.
lr_factors = st.sampled_from([1.0, 0.5, 0.1]) | st.floats(0.01, 1.0)
lr_factors_with_zero = st.sampled_from([1.0, 0.0, 0.5, 0.1]) | st.floats(0.0, 1.0)


@st.composite
def adamw_runs(
    draw: st.DrawFn,
    *,
    max_steps: int = MAX_ADAMW_STEPS,
    max_groups: int = 3,
    per_group: str = "lr",
    schedule: bool = True,
    edges: bool = False,
    zero_lr: bool = False,
) -> AdamWRun:
    """``per_group="lr"``: groups override the learning rate only (the
    contract); ``"all"``: lr, betas, eps and weight_decay (STRICT).
    ``schedule``: the test changes every group's lr before every step.
    ``edges``: hyperparameters at the contract's boundaries (STRICT).
    ``zero_lr``: the schedule may write lr = 0 (STRICT)."""
    defaults = draw(adamw_hypers(edges=edges), label="defaults")
    n_groups = draw(st.integers(1, max_groups), label="n_groups")
    groups = []
    for i in range(n_groups):
        group_shapes = draw(st.lists(shapes, min_size=1, max_size=MAX_PARAMS_PER_GROUP), label=f"shapes{i}")
        own = draw(st.booleans(), label=f"own_hyper{i}") if i else n_groups > 1
        if not own:
            hyper = defaults
        elif per_group == "lr":
            hyper = defaults._replace(lr=draw(log_uniform(*LR_RANGE), label=f"lr{i}"))
        else:
            hyper = draw(adamw_hypers(edges=edges), label=f"hyper{i}")
        groups.append(AdamWGroup(tuple(group_shapes), hyper, own))
    steps = draw(st.integers(1, max_steps), label="steps")
    n_params = sum(len(g.shapes) for g in groups)
    sometimes_none = draw(st.booleans(), label="sometimes_none")
    present = tuple(
        tuple(draw(st.booleans(), label=f"present{s}") if sometimes_none else True for _ in range(n_params))
        for s in range(steps)
    )
    factor = lr_factors_with_zero if zero_lr else lr_factors
    factors = tuple(
        tuple(draw(factor, label=f"lr factor{s}") if schedule else 1.0 for _ in range(n_groups)) for s in range(steps)
    )
    grad_scale = draw(log_uniform(1e-4, 10.0), label="grad_scale")
    return AdamWRun(
        defaults,
        tuple(groups),
        steps,
        grad_scale,
        present,
        draw(st.integers(0, 2**16), label="seed"),
        factors if schedule else (),
        per_group,
    )


# --- cosine schedule -------------------------------------------------------------------
class Schedule(NamedTuple):
    alpha_max: float
    alpha_min: float
    warmup: int  # T_w
    cycle: int  # T_c > T_w

    def boundary_iters(self) -> list[int]:
        """Every t where a branch starts or ends, with its neighbours."""
        ts = {0, 1, self.warmup - 1, self.warmup, self.warmup + 1, self.cycle - 1, self.cycle}
        ts |= {self.cycle + 1, self.cycle + 2, 2 * self.cycle + 5}
        return sorted(t for t in ts if t >= 0)


@st.composite
def schedules(draw: st.DrawFn, *, min_warmup: int = 1, max_iters: int = MAX_SCHEDULE_ITERS) -> Schedule:
    alpha_max = draw(log_uniform(1e-5, 10.0), label="alpha_max")
    # α_min = α_max (a constant schedule) is an edge: MUST draws stay below half.
    alpha_min = alpha_max * draw(st.sampled_from([0.0, 0.1]) | st.floats(0.0, 0.5), label="min_fraction")
    warmup = draw(st.integers(min_warmup, max_iters // 2), label="warmup")
    cycle = draw(st.integers(warmup + 1, max_iters), label="cycle")
    return Schedule(alpha_max, alpha_min, warmup, cycle)


# --- gradient clipping -------------------------------------------------------------------
class ClipCase(NamedTuple):
    shapes: tuple[tuple[int, ...], ...]
    frozen: tuple[bool, ...]  # requires_grad False (grad stays None)
    no_grad: tuple[bool, ...]  # trainable but grad None
    grad_scale: float
    max_norm: float
    seed: int


@st.composite
def clip_cases(draw: st.DrawFn, *, max_params: int = 5) -> ClipCase:
    param_shapes = tuple(draw(st.lists(shapes, min_size=1, max_size=max_params), label="shapes"))
    n = len(param_shapes)
    frozen = tuple(draw(st.lists(st.booleans(), min_size=n, max_size=n), label="frozen"))
    no_grad = tuple(draw(st.lists(st.booleans(), min_size=n, max_size=n), label="no_grad"))
    if all(f or g for f, g in zip(frozen, no_grad)):  # at least one gradient
        frozen, no_grad = (False, *frozen[1:]), (False, *no_grad[1:])
    grad_scale = draw(log_uniform(1e-3, 10.0), label="grad_scale")
    max_norm = draw(log_uniform(1e-3, 10.0), label="max_norm")
    return ClipCase(
        param_shapes,
        frozen,
        no_grad,
        grad_scale,
        max_norm,
        draw(st.integers(0, 2**16), label="seed"),
    )


# --- generation ----------------------------------------------------------------------------
class TemperatureCase(NamedTuple):
    lead: tuple[int, ...]
    vocab: int
    scale: float
    temperature: float
    seed: int


@st.composite
def temperature_cases(draw: st.DrawFn) -> TemperatureCase:
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=1), label="lead"))
    vocab = draw(st.integers(2, MAX_VOCAB), label="vocab")
    scale = draw(log_uniform(0.1, 100.0), label="scale")
    temperature = draw(log_uniform(0.05, 10.0), label="temperature")
    return TemperatureCase(lead, vocab, scale, temperature, draw(st.integers(0, 2**16), label="seed"))


class TopPCase(NamedTuple):
    weights: tuple[float, ...]  # unnormalised; probs = weights / sum
    top_p: float
    batch: bool  # also filter a 2-D (batch, vocab) input


@st.composite
def top_p_cases(draw: st.DrawFn) -> TopPCase:
    weights = draw(
        st.lists(st.sampled_from([0.0, 1.0, 2.0]) | st.floats(0.0, 10.0), min_size=2, max_size=MAX_VOCAB),
        label="weights",
    )
    if sum(weights) <= 0:
        weights[0] = 1.0
    top_p = draw(st.sampled_from([1.0, 0.5, 0.9]) | st.floats(0.01, 1.0), label="top_p")
    return TopPCase(tuple(weights), top_p, draw(st.booleans(), label="batch"))
