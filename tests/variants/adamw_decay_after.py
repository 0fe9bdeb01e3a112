"""VARIANT: AdamW written apart from reference/training, with the decoupled
weight decay applied AFTER the Adam update (the CS336 handout's order; the
SPEC accepts it: it differs from decay-first by O(lr²·λ)). Also other
internals than the reference: the step count is a float64 tensor in the
state, moments are updated out of place, and the update is written with the
bias-corrected moments ``m̂ = m/(1−β1^t)``, ``v̂ = v/(1−β2^t)`` and
``ε/sqrt(1−β2^t)``, which is exactly the SPEC's ``α_t·m/(sqrt(v) + ε)``.
Everything else comes from the reference adapter.
"""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {
    "what": "AdamW decaying after the Adam update, tensor step count, bias-corrected moments",
    "run": ["3.adamw", "3.checkpoint"],
}


class DecayAfterAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "t" not in state:
                    state["t"] = torch.zeros((), dtype=torch.float64)
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] = state["t"] + 1
                t = float(state["t"])
                state["m"] = beta1 * state["m"] + (1 - beta1) * p.grad
                state["v"] = beta2 * state["v"] + (1 - beta2) * p.grad.square()
                bc1, bc2 = 1 - beta1**t, 1 - beta2**t
                m_hat, v_hat = state["m"] / bc1, state["v"] / bc2
                # ε/sqrt(bc2) keeps the SPEC's ε placement: sqrt(v) + ε, not sqrt(v̂) + ε
                p.sub_(group["lr"] * m_hat / (v_hat.sqrt() + group["eps"] / math.sqrt(bc2)))
                p.sub_(group["lr"] * group["weight_decay"] * p)
        return loss


def get_adamw_cls():
    return DecayAfterAdamW
