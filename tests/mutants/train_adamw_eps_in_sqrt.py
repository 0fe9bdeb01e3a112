"""MUTANT: AdamW dividing by sqrt(v + eps) instead of sqrt(v) + eps."""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.adamw",
    "bug": "eps inside the square root",
    "run": ["3.adamw"],
    "hinted": ["eps inside the square root"],
}


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

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
                state["step"] = state.get("step", 0) + 1
                t = state["step"]
                m, v = state["m"], state["v"]
                g = p.grad
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                alpha_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
                p.addcdiv_(m, v.add(eps).sqrt(), value=-alpha_t)  # BUG: sqrt(v + eps)
                p.mul_(1 - lr * lam)
        return loss


def get_adamw_cls():
    return AdamW
