"""softmax, cross-entropy and gradient clipping (handout sections 3.5.4, 4.1, 4.5)."""

from collections.abc import Iterable

import torch


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    # subtract the max for numerical stability (exp of big numbers overflows)
    x_max = torch.max(x, dim=dim, keepdim=True).values
    exp = torch.exp(x - x_max)
    return exp / torch.sum(exp, dim=dim, keepdim=True)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over all positions of -log softmax(logits)[target].

    logits: (..., vocab_size), targets: (...)
    """
    logits_max = torch.max(logits, dim=-1, keepdim=True).values
    shifted = logits - logits_max
    log_sum_exp = torch.log(torch.sum(torch.exp(shifted), dim=-1))
    target_logits = torch.gather(shifted, dim=-1, index=targets.unsqueeze(-1)).squeeze(-1)
    return (log_sum_exp - target_logits).mean()


def perplexity(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.exp(cross_entropy(logits, targets))


def gradient_clipping(parameters: Iterable[torch.nn.Parameter], max_l2_norm: float, eps: float = 1e-6) -> None:
    """Clip the combined l2 norm of all the gradients to max_l2_norm (in place)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    total_norm = torch.sqrt(sum(torch.sum(g.detach().float() ** 2) for g in grads))
    if total_norm > max_l2_norm:
        scale = max_l2_norm / (total_norm + eps)
        for g in grads:
            g.mul_(scale.to(g.dtype))
