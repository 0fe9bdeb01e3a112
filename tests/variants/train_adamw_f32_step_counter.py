"""VARIANT: AdamW keeping its step count as a float32 tensor
(``state["step"] = torch.tensor(0.0)``, incremented in float32) and computing
the bias corrections ``1 − β^t`` from it as float32 tensors, the update
written with the bias-corrected moments ``m̂ / (sqrt(v̂) + ε)`` (torch's ε
placement) and the decay after the Adam step (the handout's order). Its
1 − β2^t carries float32 rounding of β2 (≈ 3e-8 / (1 − β2) relative): the
AdamW tolerance must admit it (conformance/tolerances.py ADAMW_TRAJECTORY).
Everything else comes from the reference adapter.
"""

import torch

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {
    "what": "AdamW with a float32 tensor step counter and float32 bias corrections",
    "run": ["3.adamw", "3.checkpoint"],
}


class Float32StepAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                step = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = m / (1 - beta1**step)
                v_hat = v / (1 - beta2**step)
                p.sub_(lr * m_hat / (v_hat.sqrt() + group["eps"]))
                p.sub_(lr * group["weight_decay"] * p)
        return loss


def get_adamw_cls():
    return Float32StepAdamW
