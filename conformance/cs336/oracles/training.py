"""Oracles for SPEC §3 (training) and §4 (generation), computed in float64 on
CPU apart from the implementation under test.

Cross-entropy and gradient clipping use torch built-ins in float64; AdamW,
the cosine schedule, temperature and top-p are written out from the SPEC
formulas; greedy decoding runs the SPEC §2 LM oracle of oracles/nn.py. The
AdamW oracle takes flags that switch on known bugs, so a failing test can
name the bug whose trajectory it reproduced.
"""

import math
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from lmspec.conformance.cs336.oracles.nn import ModelConfig, lm
from lmspec.conformance.hints import KnownBugs

#: Known bugs of the §3 items (hints), registered beside their oracles.
KNOWN_BUGS = KnownBugs()

# Taken at import (before any submission code runs in a test), so a
# submission that patches torch cannot change what the oracles compute.
_cross_entropy = F.cross_entropy
_clip_grad_norm = torch.nn.utils.clip_grad_norm_
_AdamW = torch.optim.AdamW
F64 = torch.float64


# --- §3 cross-entropy / perplexity ---------------------------------------------
def cross_entropy64(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean over all leading positions of ``logsumexp(o) − o[target]`` (float64)."""
    flat = logits.detach().to("cpu", F64).reshape(-1, logits.shape[-1])
    return _cross_entropy(flat, targets.detach().to("cpu").reshape(-1), reduction="mean")


def cross_entropy_per_position64(logits: Tensor, targets: Tensor) -> Tensor:
    flat = logits.detach().to("cpu", F64).reshape(-1, logits.shape[-1])
    return _cross_entropy(flat, targets.detach().to("cpu").reshape(-1), reduction="none")


def _picked(logits: Tensor, targets: Tensor) -> Tensor:
    """o[target] at every position."""
    return logits.gather(-1, targets.detach().cpu().unsqueeze(-1)).squeeze(-1)


def _f64(logits: Tensor) -> Tensor:
    return logits.detach().to("cpu", F64)


for _item, _cause, _replay in (
    (
        "3.cross_entropy",
        "summed over positions instead of the mean",
        lambda o, t: cross_entropy_per_position64(o, t).sum(),
    ),
    (
        "3.cross_entropy",
        "averaged over the vocabulary too (divided by vocab size)",
        lambda o, t: cross_entropy64(o, t) / o.shape[-1],
    ),
    ("3.cross_entropy", "returned the mean of −o[target] without logsumexp", lambda o, t: -_picked(_f64(o), t).mean()),
    ("3.cross_entropy", "returned mean logsumexp, forgot − o[target]", lambda o, t: _f64(o).logsumexp(-1).mean()),
    # Computed in float32 as the bug computes it: they reproduce its inf or NaN.
    (
        "3.cross_entropy",
        "no max subtraction: exp(o) overflows to inf (or every exp underflows to 0); "
        "use logsumexp(o) = max(o) + log Σ exp(o − max(o))",
        lambda o, t: (o.detach().cpu().float().exp().sum(-1).log() - _picked(o.detach().cpu().float(), t)).mean(),
    ),
    (
        "3.cross_entropy",
        "log of a softmax probability that underflowed to 0: compute logsumexp(o) − o[target] "
        "instead of −log softmax(o)[target]",
        lambda o, t: -_picked(torch.softmax(o.detach().cpu().float(), -1), t).log().mean(),
    ),
    ("3.perplexity", "exp of the summed cross-entropy", lambda o, t: cross_entropy_per_position64(o, t).sum().exp()),
    (
        "3.perplexity",
        "mean of per-position exp(CE) instead of exp of the mean",
        lambda o, t: cross_entropy_per_position64(o, t).exp().mean(),
    ),
    ("3.perplexity", "returned the cross-entropy itself (no exp)", cross_entropy64),
):
    KNOWN_BUGS.add(_item, _cause, _replay)


# --- §3 AdamW --------------------------------------------------------------------
class AdamWHyper(NamedTuple):
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float

    def as_kwargs(self) -> dict:
        return {
            "lr": self.lr,
            "betas": (self.beta1, self.beta2),
            "eps": self.eps,
            "weight_decay": self.weight_decay,
        }


class AdamWBugs(NamedTuple):
    """Switches that turn the oracle into a known wrong AdamW (for hints)."""

    no_bias_correction: bool = False
    l2_in_gradient: bool = False  # g ← g + λθ and no decoupled decay (Adam + L2)
    decay_with_alpha_t: bool = False  # θ ← θ − α_t λ θ instead of lr λ θ
    eps_inside_sqrt: bool = False  # sqrt(v + eps) instead of sqrt(v) + eps
    step_offset: int = 0  # 1: first update uses t = 2
    none_grad_as_zero: bool = False  # a None grad counts as a zero gradient


NO_BUGS = AdamWBugs()
DecayOrder = Literal["before", "after"]
EpsForm = Literal["spec", "torch"]


class AdamWOracle:
    """Float64 AdamW of SPEC §3 with per-parameter state (m, v, t).

    ``decay``: "before" (torch.optim.AdamW) or "after" the Adam update.
    ``eps_form``: "spec" divides by ``sqrt(v) + eps`` with
    ``α_t = lr·sqrt(1−β2^t)/(1−β1^t)``; "torch" divides by
    ``sqrt(v/(1−β2^t)) + eps`` with step ``lr/(1−β1^t)`` (the textbook form
    torch uses; it differs only in where eps sits).
    """

    def __init__(
        self,
        groups: Sequence[tuple[Sequence[Tensor], AdamWHyper]],
        *,
        decay: DecayOrder = "before",
        eps_form: EpsForm = "spec",
        bugs: AdamWBugs = NO_BUGS,
    ):
        self.groups = [([p.detach().to("cpu", F64).clone() for p in ps], hp) for ps, hp in groups]
        self.decay, self.eps_form, self.bugs = decay, eps_form, bugs
        self.state: dict[tuple[int, int], dict] = {}

    def params(self) -> list[Tensor]:
        return [p for ps, _ in self.groups for p in ps]

    def step(self, grads: Sequence[Tensor | None], lrs: Sequence[float] | None = None) -> None:
        """One update; ``grads`` follow ``params()`` order (None: no grad);
        ``lrs`` (one per group) replace the groups' learning rates for this
        step, as a schedule writing ``group["lr"]`` does."""
        it = iter(grads)
        for gi, (ps, hp) in enumerate(self.groups):
            if lrs is not None:
                hp = hp._replace(lr=lrs[gi])
            for pi, p in enumerate(ps):
                g = next(it)
                if g is None:
                    if not self.bugs.none_grad_as_zero:
                        continue
                    g = torch.zeros_like(p)
                self._update(self.state.setdefault((gi, pi), {}), p, g.to("cpu", F64), hp)

    def _update(self, st: dict, p: Tensor, g: Tensor, hp: AdamWHyper) -> None:
        bugs = self.bugs
        lam = hp.weight_decay
        if bugs.l2_in_gradient:
            g = g + lam * p
        t = st.get("t", 0) + 1
        st["t"] = t
        te = t + bugs.step_offset
        m = st["m"] = hp.beta1 * st.get("m", torch.zeros_like(p)) + (1 - hp.beta1) * g
        v = st["v"] = hp.beta2 * st.get("v", torch.zeros_like(p)) + (1 - hp.beta2) * g * g
        bc1 = 1.0 if bugs.no_bias_correction else 1 - hp.beta1**te
        bc2 = 1.0 if bugs.no_bias_correction else 1 - hp.beta2**te
        alpha_t = hp.lr * math.sqrt(bc2) / bc1
        root = (v + hp.eps).sqrt() if bugs.eps_inside_sqrt else v.sqrt()
        if self.eps_form == "spec":
            update = alpha_t * m / (root + (0.0 if bugs.eps_inside_sqrt else hp.eps))
        else:
            denom = root / math.sqrt(bc2) + (0.0 if bugs.eps_inside_sqrt else hp.eps)
            update = (hp.lr / bc1) * m / denom
        decay = 0.0 if bugs.l2_in_gradient else (alpha_t if bugs.decay_with_alpha_t else hp.lr) * lam
        if self.decay == "before":
            p.mul_(1 - decay).sub_(update)
        else:
            p.sub_(update).mul_(1 - decay)


def flat(tensors: Sequence[Tensor]) -> Tensor:
    """All tensors flattened into one float64 CPU vector (trajectory rows)."""
    if not tensors:
        return torch.zeros(0, dtype=F64)
    return torch.cat([t.detach().to("cpu", F64).reshape(-1) for t in tensors])


Groups = Sequence[tuple[Sequence[Tensor], AdamWHyper]]
Grads = Sequence[Sequence[Tensor | None]]
LRs = Sequence[Sequence[float]] | None  # lrs[step][group]: the schedule's group["lr"] values


def adamw_trajectory(
    groups: Groups,
    grads: Grads,
    *,
    lrs: LRs = None,
    restart_t_after: int | None = None,
    **oracle_kwargs,
) -> Tensor:
    """(steps, n_params) float64: all parameters after each oracle step.
    ``lrs`` sets every group's learning rate at every step (None: the groups'
    own). ``restart_t_after=k`` resets every step count after k steps (m, v
    kept): what a state_dict without t gives."""
    opt = AdamWOracle(groups, **oracle_kwargs)
    rows = []
    for i, step_grads in enumerate(grads):
        if i == restart_t_after:
            for st in opt.state.values():
                st["t"] = 0
        opt.step(step_grads, None if lrs is None else lrs[i])
        rows.append(flat(opt.params()))
    return torch.stack(rows)


def torch_adamw_trajectory(groups: Groups, grads: Grads, lrs: LRs = None) -> Tensor:
    """The same run through torch.optim.AdamW in float64 (foreach off)."""
    params = [[p.detach().to("cpu", F64).clone().requires_grad_(True) for p in ps] for ps, _ in groups]
    opt = _AdamW(
        [{"params": ps, **hp.as_kwargs()} for ps, (_, hp) in zip(params, groups)],
        foreach=False,
    )
    everything = [p for ps in params for p in ps]
    rows = []
    for i, step_grads in enumerate(grads):
        for p, g in zip(everything, step_grads):
            p.grad = None if g is None else g.to("cpu", F64).clone()
        if lrs is not None:
            for group, lr in zip(opt.param_groups, lrs[i]):
                group["lr"] = lr
        opt.step()
        rows.append(flat(everything))
    return torch.stack(rows)


def accepted_adamw_trajectories(groups: Groups, grads: Grads, lrs: LRs = None) -> dict[str, Callable[[], Tensor]]:
    """Every AdamW the SPEC accepts (decay before/after; torch's eps placement
    as the official test does), as lazy trajectories, the handout's formula
    first: torch.optim.AdamW, last, is only run for an implementation that
    matches none of the others (its first step in a process imports
    torch._dynamo, 2.5-3.5 s)."""
    return {
        "SPEC formula, decay before the update": lambda: adamw_trajectory(groups, grads, lrs=lrs),
        "SPEC formula, decay after the update": lambda: adamw_trajectory(groups, grads, lrs=lrs, decay="after"),
        "torch's eps placement, decay after the update": lambda: adamw_trajectory(
            groups, grads, lrs=lrs, decay="after", eps_form="torch"
        ),
        "torch.optim.AdamW (decay before the update)": lambda: torch_adamw_trajectory(groups, grads, lrs),
    }


def nearest_decay_order(actual: Tensor, make: Callable[[DecayOrder], Tensor]) -> Tensor:
    """``make(decay)`` for the decay order whose result is closest to ``actual``."""
    cands = [make("before"), make("after")]

    def distance(c: Tensor) -> float:
        if c.shape != actual.shape:
            return math.inf
        return float((c - actual).abs().nan_to_num(math.inf).max())

    return min(cands, key=distance)


def adamw_bug_hints(
    groups: Groups, grads: Grads, defaults: AdamWHyper, actual: Tensor, lrs: LRs = None
) -> list[tuple[str, Callable[[], Tensor]]]:
    """(cause, trajectory) for recognisable AdamW bugs, each in the decay order
    nearest ``actual``. ``lrs``: the learning rates the test wrote into each
    group before each step (None: constant)."""

    def bug(**flags) -> Callable[[], Tensor]:
        return lambda: nearest_decay_order(
            actual, lambda d: adamw_trajectory(groups, grads, lrs=lrs, decay=d, bugs=AdamWBugs(**flags))
        )

    def trajectory(gs: Groups, step_lrs: LRs) -> Callable[[], Tensor]:
        return lambda: nearest_decay_order(actual, lambda d: adamw_trajectory(gs, grads, lrs=step_lrs, decay=d))

    constructor = [(ps, defaults) for ps, _ in groups]
    hints = [
        ("no bias correction: α_t must be lr·sqrt(1−β2^t)/(1−β1^t)", bug(no_bias_correction=True)),
        (
            "weight decay added to the gradient (Adam + L2) instead of decoupled θ ← θ − lr·λ·θ",
            bug(l2_in_gradient=True),
        ),
        ("weight decay scaled by α_t instead of lr (θ ← θ − lr·λ·θ)", bug(decay_with_alpha_t=True)),
        ("eps inside the square root: divide by sqrt(v) + eps", bug(eps_inside_sqrt=True)),
        ("step count off by one: the first update must use t = 1", bug(step_offset=1)),
        (
            "a parameter whose grad is None was updated: skip it (no decay, no state change)",
            bug(none_grad_as_zero=True),
        ),
        (
            "the constructor's hyperparameters were used for every group and step: "
            "read lr (and betas, eps, weight_decay) from each param group at every step",
            trajectory(constructor, None),
        ),
    ]
    if lrs is not None:
        hints.append(
            (
                "the learning rate was read once (at construction) instead of from group['lr'] "
                "at every step: a schedule's changes were ignored",
                trajectory(groups, None),
            )
        )
    return hints


# --- §3 get_batch: the distribution of the starts ---------------------------------------
# A replay takes the number of valid starts n (0..len(x)−m−1) and returns the
# probability of each start the bug draws with, compared with the drawn
# starts' counts by the same statistical test as the uniform oracle's.
def _rounded_uniform(n: int) -> list[float]:
    if n < 2:
        raise ValueError("one start: rounding changes nothing")
    return [0.5 / (n - 1) if s in (0, n - 1) else 1 / (n - 1) for s in range(n)]


for _cause, _replay in (
    (
        "starts = round(U(0, 1)·(n − 1)): the first and last start are half as likely; draw integers (randint)",
        _rounded_uniform,
    ),
    (
        "the last valid start len(x) − m − 1 is never drawn (an exclusive upper bound one too low)",
        lambda n: [1 / (n - 1) if s < n - 1 else 0.0 for s in range(n)],
    ),
    ("start 0 is never drawn (starts from 1)", lambda n: [1 / (n - 1) if s > 0 else 0.0 for s in range(n)]),
):
    KNOWN_BUGS.add("3.get_batch", _cause, _replay)


# --- §3 cosine schedule ----------------------------------------------------------
def cosine_lr(t: int, alpha_max: float, alpha_min: float, warmup: int, cycle: int) -> float:
    """SPEC §3: linear warmup to α_max over T_w, cosine to α_min at T_c, then α_min."""
    if t < warmup:
        return alpha_max * t / warmup
    if t <= cycle:
        return alpha_min + 0.5 * (1 + math.cos(math.pi * (t - warmup) / (cycle - warmup))) * (alpha_max - alpha_min)
    return alpha_min


def _cos(x: float) -> float:
    return 0.5 * (1 + math.cos(math.pi * x))


def _in_cosine(f):
    def sched(t, a_max, a_min, tw, tc):
        return a_min + f(t, tw, tc) * (a_max - a_min) if tw <= t <= tc else cosine_lr(t, a_max, a_min, tw, tc)

    return sched


@KNOWN_BUGS.register("3.cosine_schedule", "warmup off by one: α_max·(t+1)/T_w")
def _warmup_ahead(t, a_max, a_min, tw, tc):
    return a_max * (t + 1) / tw if t < tw else cosine_lr(t, a_max, a_min, tw, tc)


KNOWN_BUGS.add(
    "3.cosine_schedule",
    "cosine progress over T_c instead of T_c − T_w",
    _in_cosine(lambda t, tw, tc: _cos((t - tw) / tc)),
)
KNOWN_BUGS.add(
    "3.cosine_schedule",
    "cosine progress t/T_c instead of (t − T_w)/(T_c − T_w)",
    _in_cosine(lambda t, tw, tc: _cos(t / tc)),
)


@KNOWN_BUGS.register("3.cosine_schedule", "after T_c the cosine continues instead of staying at α_min")
def _never_floors(t, a_max, a_min, tw, tc):
    return a_min + _cos((t - tw) / (tc - tw)) * (a_max - a_min) if t >= tw else cosine_lr(t, a_max, a_min, tw, tc)


# --- §3 gradient clipping ----------------------------------------------------------
def clipped_grads_torch(grads: Sequence[Tensor | None], max_norm: float) -> list[Tensor | None]:
    """Gradients after torch.nn.utils.clip_grad_norm_ (float64 copies)."""
    params = []
    for g in grads:
        p = torch.zeros(g.shape if g is not None else (1,), dtype=F64, requires_grad=True)
        p.grad = None if g is None else g.detach().to("cpu", F64).clone()
        params.append(p)
    _clip_grad_norm(params, max_norm, foreach=False)
    return [p.grad for p in params]


def clipped_grads_formula(
    grads: Sequence[Tensor | None],
    max_norm: float,
    *,
    per_tensor: bool = False,
    eps: float = 1e-6,
    eps_in_sqrt: bool = False,
) -> list[Tensor | None]:
    """SPEC formula (global norm; ``per_tensor`` switches on a known bug,
    ``eps``/``eps_in_sqrt`` another epsilon or its placement:
    max_norm/sqrt(Σg² + eps))."""
    present = [g.detach().to("cpu", F64) for g in grads if g is not None]

    def scale(gs: list[Tensor]) -> float:
        squares = sum(float((g * g).sum()) for g in gs)
        norm = math.sqrt(squares)
        if norm <= max_norm:
            return 1.0
        return max_norm / math.sqrt(squares + eps) if eps_in_sqrt else max_norm / (norm + eps)

    out: list[Tensor | None] = []
    common = scale(present)
    for g in grads:
        if g is None:
            out.append(None)
            continue
        g64 = g.detach().to("cpu", F64)
        out.append(g64 * (scale([g64]) if per_tensor else common))
    return out


KNOWN_BUGS.add(
    "3.gradient_clipping",
    "clipped each parameter by its own norm: use one global norm over all gradients",
    lambda grads, max_norm: clipped_grads_formula(grads, max_norm, per_tensor=True),
)
KNOWN_BUGS.add(
    "3.gradient_clipping",
    "no epsilon, max_norm/norm (or one far below 1e-6): the handout adds 1e-6 to the norm",
    lambda grads, max_norm: clipped_grads_formula(grads, max_norm, eps=0.0),
)
KNOWN_BUGS.add(
    "3.gradient_clipping",
    "epsilon inside the square root, max_norm/sqrt(Σg² + 1e-8): the handout adds 1e-6 to the norm",
    lambda grads, max_norm: clipped_grads_formula(grads, max_norm, eps=1e-8, eps_in_sqrt=True),
)


@KNOWN_BUGS.register("3.gradient_clipping", "gradients scaled even when the global norm is below max_norm")
def _always_scaled(grads, max_norm):
    present = [g.detach().to("cpu", F64) for g in grads if g is not None]
    scale = max_norm / (math.sqrt(sum(float((g * g).sum()) for g in present)) + 1e-6)
    return [None if g is None else g.detach().to("cpu", F64) * scale for g in grads]


# --- §4 generation -----------------------------------------------------------------
def temperature_softmax64(logits: Tensor, temperature: float) -> Tensor:
    """softmax(v/τ) over the last dim in float64; τ == 0: one-hot at argmax."""
    v = logits.detach().to("cpu", F64)
    if temperature == 0:
        return torch.zeros_like(v).scatter_(-1, v.argmax(-1, keepdim=True), 1.0)
    return torch.softmax(v / temperature, dim=-1)


def top_p_filter64(probs: Tensor, top_p: float) -> Tensor:
    """Keep the smallest most-probable set with mass ≥ p, renormalise, zero the rest."""
    p = probs.detach().to("cpu", F64)
    sorted_p, order = p.sort(dim=-1, descending=True, stable=True)
    mass_before = sorted_p.cumsum(-1) - sorted_p
    keep_sorted = mass_before < top_p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = torch.where(keep, p, torch.zeros_like(p))
    return kept / kept.sum(-1, keepdim=True)


def _top_p_count(probs: Tensor, top_p: float, shift: int, *, renormalise: bool = True) -> Tensor:
    """The most probable tokens, ``shift`` more (or fewer) than the oracle
    keeps (at least one, at most all)."""
    p = probs.detach().to("cpu", F64)
    n = int((top_p_filter64(p, top_p) > 0).sum(-1).max()) + shift
    order = p.sort(dim=-1, descending=True, stable=True).indices[..., : max(1, min(n, p.shape[-1]))]
    kept = torch.zeros_like(p).scatter(-1, order, p.gather(-1, order))
    return kept / kept.sum(-1, keepdim=True) if renormalise else kept


for _item, _cause, _replay in (
    (
        "4.generation/temperature",
        "temperature applied after the softmax (softmax(v) / τ)",
        lambda v, t: torch.softmax(v.double(), -1) / t,
    ),
    (
        "4.generation/temperature",
        "multiplied by τ instead of dividing (softmax(v·τ))",
        lambda v, t: torch.softmax(v.double() * t, -1),
    ),
    ("4.generation/temperature", "temperature ignored", lambda v, t: torch.softmax(v.double(), -1)),
    ("4.generation/temperature", "softmax over the wrong dimension", lambda v, t: torch.softmax(v.double() / t, 0)),
    (
        "4.generation/top_p",
        "kept one token too few (stopped before the mass reached p)",
        lambda probs, p: _top_p_count(probs, p, -1),
    ),
    (
        "4.generation/top_p",
        "kept one token too many (cumulative mass > p instead of ≥ p)",
        lambda probs, p: _top_p_count(probs, p, +1),
    ),
    ("4.generation/top_p", "not renormalised", lambda probs, p: _top_p_count(probs, p, 0, renormalise=False)),
):
    KNOWN_BUGS.add(_item, _cause, _replay)


# One sampling step: a replay gives the distribution the bug samples from
# (logits, τ > 0, p), compared with the draws' counts by the same statistical
# test as the oracle's; each term of top_p(softmax(v/τ)) left out or misplaced.
for _cause, _replay in (
    (
        "sampled from softmax(v/τ) without the top-p filter",
        lambda v, t, p: temperature_softmax64(v, t),
    ),
    (
        "temperature not applied: sampled from top_p(softmax(v))",
        lambda v, t, p: top_p_filter64(temperature_softmax64(v, 1.0), p),
    ),
    (
        "multiplied by τ instead of dividing: sampled from top_p(softmax(v·τ))",
        lambda v, t, p: top_p_filter64(torch.softmax(v.double() * t, -1), p),
    ),
):
    KNOWN_BUGS.add("4.generation/sampling", _cause, _replay)


@KNOWN_BUGS.register(
    "4.generation/sampling", "top-p taken on softmax(v) before the temperature: the nucleus of τ = 1, then softmax(v/τ)"
)
def _nucleus_before_temperature(v, t, p):
    keep = top_p_filter64(temperature_softmax64(v, 1.0), p) > 0
    q = torch.where(keep, temperature_softmax64(v, t), torch.zeros((), dtype=F64))
    return q / q.sum(-1, keepdim=True)


# The float64 LM is SPEC §2's oracle (conformance/cs336/oracles/nn.py, written
# apart from ours; an independent version written here agreed to 7e-15).
LMConfig = ModelConfig


def lm_logits64(cfg: LMConfig, weights: dict[str, Tensor], ids: Sequence[int]) -> Tensor:
    """Float64 logits (seq, vocab) of the SPEC §2 LM on one sequence."""
    return lm(torch.as_tensor(list(ids), dtype=torch.long), weights, cfg)


def next_logits64(cfg: LMConfig, weights: dict[str, Tensor], tokens: Sequence[int]) -> Tensor:
    """Final-position logits on the last ``context_length`` tokens (SPEC §4)."""
    return lm_logits64(cfg, weights, list(tokens)[-cfg.context_length :])[-1]


def greedy_decode64(
    cfg: LMConfig, weights: dict[str, Tensor], prompt: Sequence[int], max_new_tokens: int
) -> tuple[list[int], float]:
    """Greedy continuation and the smallest top-1/top-2 logit gap seen."""
    tokens, out, gap = list(prompt), [], math.inf
    for _ in range(max_new_tokens):
        logits = next_logits64(cfg, weights, tokens)
        top = logits.topk(2).values
        gap = min(gap, float(top[0] - top[1]))
        nxt = int(logits.argmax())
        tokens.append(nxt)
        out.append(nxt)
    return out, gap


def random_lm_weights(cfg: LMConfig, seed: int, *, head_scale: float = 4.0) -> dict[str, Tensor]:
    """Deterministic float32 LM weights with SPEC §2 key names; the LM head is
    scaled up so next-token logits are well separated (greedy is unambiguous)."""
    gen = torch.Generator().manual_seed(seed)

    def mat(rows: int, cols: int, scale: float = 1.0) -> Tensor:
        return torch.randn(rows, cols, generator=gen) * (scale / math.sqrt(cols))

    def gain(n: int) -> Tensor:
        return 1.0 + 0.1 * torch.randn(n, generator=gen)

    d, ff = cfg.d_model, cfg.d_ff
    w = {"token_embeddings.weight": torch.randn(cfg.vocab_size, d, generator=gen)}
    for i in range(cfg.num_layers):
        pre = f"layers.{i}."
        for n in "qkv":
            w[f"{pre}attn.{n}_proj.weight"] = mat(d, d)
        w[pre + "attn.output_proj.weight"] = mat(d, d)
        w[pre + "ln1.weight"] = gain(d)
        w[pre + "ffn.w1.weight"] = mat(ff, d)
        w[pre + "ffn.w2.weight"] = mat(d, ff)
        w[pre + "ffn.w3.weight"] = mat(ff, d)
        w[pre + "ln2.weight"] = gain(d)
    w["ln_final.weight"] = gain(d)
    w["lm_head.weight"] = mat(cfg.vocab_size, d, head_scale)
    return w
