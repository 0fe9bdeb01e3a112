"""VARIANT: an optimizer that treats a step at a learning rate of 0 as no
step at all: it returns before touching the moments or the step count (a
shortcut some students take, and what a schedule's first value, warm-up from
0, then exercises). Everywhere the learning rate is positive it is the
handout's AdamW, written with per-parameter state under its own key names,
the bias correction folded into the step size and the decay before the
update (torch's order).

SPEC §3: the range of lr, (0, 0.1], holds at every step of a MUST run, so
this implementation must score full marks; a step at lr = 0 is STRICT (the
moments advance or not: the handout says nothing), reported, never scored.
Everything else comes from the reference adapter.
"""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {
    "what": "AdamW that skips a step at lr = 0 entirely (no moment or step-count update)",
    "run": ["3.adamw", "3.checkpoint"],
}


class ZeroLrSkippingAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr = group["lr"]
            if lr == 0:
                continue  # nothing would move: skip the whole group
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["n"], state["first"], state["second"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                state["n"] += 1
                n = state["n"]
                state["first"].lerp_(p.grad, 1 - b1)
                state["second"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p.mul_(1 - lr * group["weight_decay"])
                step_size = lr * math.sqrt(1 - b2**n) / (1 - b1**n)
                p.addcdiv_(state["first"], state["second"].sqrt().add_(group["eps"]), value=-step_size)
        return loss


def get_adamw_cls():
    return ZeroLrSkippingAdamW
