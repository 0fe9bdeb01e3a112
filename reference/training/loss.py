"""Cross-entropy and perplexity (SPEC §3)."""

import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = ["cross_entropy", "perplexity"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def cross_entropy(logits: Float[Tensor, "*batch vocab_size"], targets: Int[Tensor, "*batch"]) -> Float[Tensor, ""]:
    """Mean over all positions of ``logsumexp(o) - o[target]`` (SPEC §3 cross_entropy).

    Stable: the row maximum is subtracted before exponentiating, so logits
    scaled by 1000 stay finite. Half-precision logits are upcast to float32.

    Raises:
        ValueError: no positions, or a target outside ``0 .. vocab_size-1``.
    """
    vocab_size = logits.shape[-1]
    if targets.numel() == 0:
        shape = tuple(targets.shape)
        raise ValueError(f"cross_entropy needs at least one position, got targets of shape {shape}")
    # one host sync per call: a clear error beats torch's device-side assert on GPU
    lo, hi = int(targets.min()), int(targets.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"targets must lie in 0..{vocab_size - 1} (vocab_size {vocab_size}), got values in {lo}..{hi}")
    if logits.dtype in _LOW_PRECISION:
        logits = logits.float()
    # subtle: the max is a constant shift; detaching it keeps autograd simpler and the
    # gradient is unchanged (softmax - onehot) because it cancels in lse - o[target].
    shifted = logits - logits.amax(dim=-1, keepdim=True).detach()
    log_sum_exp = shifted.exp().sum(dim=-1).log()
    target_logit = shifted.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (log_sum_exp - target_logit).mean()


def perplexity(logits: Float[Tensor, "*batch vocab_size"], targets: Int[Tensor, "*batch"]) -> Float[Tensor, ""]:
    """``exp(mean cross-entropy)`` (SPEC §3 perplexity)."""
    return cross_entropy(logits, targets).exp()
