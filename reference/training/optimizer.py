"""AdamW (SPEC §3), a ``torch.optim.Optimizer`` subclass.

Per parameter, with step count ``t`` starting at 1 and gradient ``g``::

    θ ← θ − lr·λ·θ                           (decoupled weight decay, FIRST)
    m ← β1·m + (1 − β1)·g
    v ← β2·v + (1 − β2)·g²
    α_t = lr·sqrt(1 − β2^t) / (1 − β1^t)
    θ ← θ − α_t·m / (sqrt(v) + ε)

Decay order: the reference decays *before* the Adam update, as
``torch.optim.AdamW`` does; the spec accepts either order (they differ by
O(lr²·λ)). The ε placement follows the spec (``α_t`` folds in both bias
corrections, ε is added to ``sqrt(v)``); torch adds ε to ``sqrt(v / (1 − β2^t))``
instead, a difference of order ε per step.
"""

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

__all__ = ["AdamW"]

Scalar = float | int
Closure = Callable[[], Tensor | float]


def _check_hyperparameters(lr: Any, betas: Any, eps: Any, weight_decay: Any) -> None:
    """Raise ValueError naming the first invalid hyperparameter."""
    if not isinstance(lr, int | float) or not lr >= 0.0:
        raise ValueError(f"lr must be a number >= 0, got {lr!r}")
    if not isinstance(betas, tuple | list) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        if not isinstance(beta, int | float) or not 0.0 <= beta < 1.0:
            raise ValueError(f"betas[{i}] must be in [0, 1), got {beta!r}")
    if not isinstance(eps, int | float) or not eps >= 0.0:
        raise ValueError(f"eps must be a number >= 0, got {eps!r}")
    if not isinstance(weight_decay, int | float) or not weight_decay >= 0.0:
        raise ValueError(f"weight_decay must be a number >= 0, got {weight_decay!r}")


class AdamW(torch.optim.Optimizer):
    """AdamW with decoupled weight decay (Loshchilov & Hutter, 2019; SPEC §3).

    Args:
        params: parameters or parameter-group dicts; a group may override any
            of ``lr``, ``betas``, ``eps``, ``weight_decay``.
        lr: learning rate (the schedule writes ``group["lr"]`` each step).
        betas: ``(β1, β2)`` decay rates of the moment estimates, each in [0, 1).
        eps: added to ``sqrt(v)`` for numerical stability.
        weight_decay: decoupled decay rate λ (applied as ``θ ← θ − lr·λ·θ``).

    State per parameter: ``step`` (int, number of updates applied), ``exp_avg``
    (m) and ``exp_avg_sq`` (v), as in torch, so ``state_dict()`` /
    ``load_state_dict()`` round-trip exactly. Parameters whose ``grad`` is None
    are skipped (their step count does not advance).

    Raises:
        ValueError: a hyperparameter out of range (named with its value), here
            or in a later ``add_param_group``.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: Scalar = 1e-3,
        betas: tuple[Scalar, Scalar] = (0.9, 0.999),
        eps: Scalar = 1e-8,
        weight_decay: Scalar = 0.01,
    ) -> None:
        _check_hyperparameters(lr, betas, eps, weight_decay)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (missing hyperparameters come from the defaults), validated."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        _check_hyperparameters(group["lr"], group["betas"], group["eps"], group["weight_decay"])

    @torch.no_grad()
    def step(self, closure: Closure | None = None) -> Tensor | float | None:
        """Apply one AdamW update to every parameter that has a gradient.

        ``closure`` (optional) re-evaluates the model and returns the loss; it
        runs with gradients enabled and its result is returned.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = group["lr"]
            beta1, beta2 = group["betas"]
            eps = group["eps"]
            weight_decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("AdamW does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                # int(): a state loaded from torch.optim.AdamW stores step as a tensor
                t = int(state["step"]) + 1
                state["step"] = t
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

                p.mul_(1.0 - lr * weight_decay)
                exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                alpha_t = lr * math.sqrt(1.0 - beta2**t) / (1.0 - beta1**t)
                p.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(eps), value=-alpha_t)
        return loss
