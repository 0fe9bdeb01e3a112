"""VARIANT: a careful student's optimizer and schedule that validate their
arguments the way many libraries do, and otherwise follow the handout.

- ``AdamW.__init__`` raises ``ValueError`` unless ``0 < beta1 < 1``,
  ``0 < beta2 < 1``, ``eps > 0``, ``lr > 0`` and ``weight_decay >= 0``. The
  update is written in one fused expression per parameter, with the state
  kept under the student's own key names (``t``, ``m``, ``v``) and the decay
  after the Adam step (the handout's order).
- ``get_lr_cosine_schedule`` asserts ``warmup_iters > 0`` and
  ``cosine_cycle_iters > warmup_iters`` and is written with ``if``/``elif``
  on the iteration, in Python floats.

The SPEC's MUST tests draw β1 ∈ [0.5, 0.99], β2 ∈ [0.9, 0.9999], eps ∈
[1e-10, 1e-6], weight decay ∈ [0, 0.1], lr ∈ (0, 0.1] and a warm-up of at
least one iteration: this implementation must score full marks. Zero warm-up
and β1 = 0 are STRICT edges (reported, never scored). Everything else comes
from the reference adapter.
"""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {
    "what": "AdamW that rejects beta1 = 0 (0 < beta < 1 checks) and a schedule asserting warmup_iters > 0",
    "run": ["3.adamw", "3.cosine_schedule", "3.checkpoint"],
}


class CheckedAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        beta1, beta2 = betas
        if not 0.0 < beta1 < 1.0:
            raise ValueError(f"beta1 must be in (0, 1), got {beta1}")
        if not 0.0 < beta2 < 1.0:
            raise ValueError(f"beta2 must be in (0, 1), got {beta2}")
        if not eps > 0.0:
            raise ValueError(f"eps must be positive, got {eps}")
        if not lr > 0.0:
            raise ValueError(f"learning rate must be positive, got {lr}")
        if weight_decay < 0.0:
            raise ValueError(f"weight_decay must be non-negative, got {weight_decay}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                t = st.get("t", 0) + 1
                m = st.get("m", torch.zeros_like(p)) * b1 + (1 - b1) * p.grad
                v = st.get("v", torch.zeros_like(p)) * b2 + (1 - b2) * p.grad**2
                st.update(t=t, m=m, v=v)
                alpha = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
                p.sub_(alpha * m / (v.sqrt() + eps))
                p.sub_(lr * wd * p)
        return loss


def get_adamw_cls():
    return CheckedAdamW


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    assert warmup_iters > 0, "warmup_iters must be positive"
    assert cosine_cycle_iters > warmup_iters, "the cosine cycle must end after the warm-up"
    if it < warmup_iters:
        return it / warmup_iters * max_learning_rate
    elif it <= cosine_cycle_iters:
        progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
        return min_learning_rate + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_learning_rate - min_learning_rate)
    else:
        return min_learning_rate
