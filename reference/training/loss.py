"""Cross-entropy and perplexity (SPEC §3)."""

from typing import Any

import torch
from jaxtyping import Float, Integer
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["cross_entropy", "perplexity"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def cross_entropy(logits: Float[Tensor, "*batch vocab_size"], targets: Integer[Tensor, "*batch"]) -> Float[Tensor, ""]:
    """Mean over all positions of ``logsumexp(o) - o[target]`` (SPEC §3 cross_entropy).

    Stable: the row maximum is subtracted before exponentiating, so logits
    scaled by 1000 stay finite. Half-precision logits are upcast to float32.
    Targets may have any integer dtype (uint16 token files included).

    Raises:
        ValueError: no positions, or a target outside ``0 .. vocab_size-1``.
    """
    vocab_size = logits.shape[-1]
    if targets.numel() == 0:
        shape = tuple(targets.shape)
        raise ValueError(f"cross_entropy needs at least one position, got targets of shape {shape}")
    targets = targets.long()  # uint16 has no min/max, gather/scatter index with int64 only
    # one host sync per call: a clear error beats torch's device-side assert on GPU
    lo, hi = int(targets.min()), int(targets.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"targets must lie in 0..{vocab_size - 1} (vocab_size {vocab_size}), got values in {lo}..{hi}")
    if logits.dtype in _LOW_PRECISION:
        logits = logits.float()
    return _CrossEntropy.apply(logits.reshape(-1, vocab_size), targets.reshape(-1))


class _CrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``(N, V)`` logits, with its gradient written out by hand.

    ``∂loss/∂o = (softmax(o) − onehot(target)) / N``. Autograd would derive the
    same from ``exp``/``sum``/``log``/``gather``, but through about six
    logits-sized temporaries per step; this keeps two (the exps saved by the
    forward, the gradient made in the backward). The logits are usually the
    largest tensors of a step, so this is a measurable share of step time on
    CPU (BENCHMARKS.md, training step).
    """

    @staticmethod
    def forward(ctx: Any, logits: Tensor, targets: Tensor) -> Tensor:
        # subtle: subtracting the row max keeps every exp <= 1 (logits scaled
        # by 1000 stay finite) and cancels in logsumexp(o) - o[target]
        shift = logits.amax(dim=-1, keepdim=True)
        exps = (logits - shift).exp_()
        sum_exps = exps.sum(dim=-1, keepdim=True)
        target_logits = logits.gather(-1, targets.unsqueeze(-1))
        ctx.save_for_backward(exps, sum_exps, targets)
        return (sum_exps.log() + shift - target_logits).mean()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor, None]:
        exps, sum_exps, targets = ctx.saved_tensors
        grad = exps / sum_exps  # softmax, in a new buffer: the saved exps stay intact
        minus_one = torch.full((grad.shape[0], 1), -1.0, dtype=grad.dtype, device=grad.device)
        grad.scatter_add_(-1, targets.unsqueeze(-1), minus_one)
        return grad.mul_(grad_loss / grad.shape[0]), None


def perplexity(logits: Float[Tensor, "*batch vocab_size"], targets: Integer[Tensor, "*batch"]) -> Float[Tensor, ""]:
    """``exp(mean cross-entropy)`` (SPEC §3 perplexity)."""
    return cross_entropy(logits, targets).exp()
