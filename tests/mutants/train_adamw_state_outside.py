"""MUTANT: AdamW keeping the step count outside self.state (state_dict() misses it)."""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.adamw",
    "bug": "step count not in state_dict: after load_state_dict it restarts at 1",
    "run": ["3.adamw", "3.checkpoint"],
    "hinted": ["the step count t is not in state_dict", "explained by 3.adamw (fix that first)"],
}


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self._steps = {}

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, (b1, b2), eps, lam = (
                group["lr"],
                group["betas"],
                group["eps"],
                group["weight_decay"],
            )
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(m=torch.zeros_like(p), v=torch.zeros_like(p))
                self._steps[p] = self._steps.get(p, 0) + 1  # BUG: outside self.state
                t = self._steps[p]
                m, v = state["m"], state["v"]
                g = p.grad
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                alpha_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
                p.addcdiv_(m, v.sqrt().add_(eps), value=-alpha_t)
                p.mul_(1 - lr * lam)
        return loss


def get_adamw_cls():
    return AdamW
