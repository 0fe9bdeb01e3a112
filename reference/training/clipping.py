"""Global-norm gradient clipping (SPEC §3)."""

from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = ["clip_grad_norm"]


def clip_grad_norm(params: Iterable[Tensor] | Tensor, max_norm: float | int, eps: float = 1e-6) -> float:
    """Clip gradients in place to a global L2 norm of at most ``max_norm``.

    ``norm = sqrt(Σ_p Σ_i g_{p,i}²)`` over the parameters that have a gradient
    (others are skipped). Only if ``norm > max_norm`` is every gradient scaled
    by ``max_norm / (norm + eps)``; otherwise the gradients are left untouched.
    ``params`` may be any iterable (a generator such as ``model.parameters()``
    is consumed once) or a single tensor.

    Returns:
        The total norm before clipping (0.0 when no parameter has a gradient).

    Raises:
        ValueError: ``max_norm`` or ``eps`` negative.
    """
    if not max_norm >= 0:
        raise ValueError(f"max_norm must be >= 0, got {max_norm}")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if isinstance(params, Tensor):
        params = [params]
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    device = grads[0].device
    # upcast: half-precision squares overflow/lose mass; float64 grads keep float64
    acc = torch.float64 if any(g.dtype == torch.float64 for g in grads) else torch.float32
    squares = torch.stack([g.detach().to(device=device, dtype=acc).square().sum() for g in grads])
    total_norm = squares.sum().sqrt()
    norm = float(total_norm)
    if norm > max_norm:
        scale = max_norm / (norm + eps)
        for g in grads:
            g.detach().mul_(scale)
    return norm
