"""Numerically stable softmax (SPEC §2 "softmax")."""

import torch
from jaxtyping import Float
from torch import Tensor


def softmax(x: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    """``softmax(x)_i = exp(x_i − max x) / Σ_j exp(x_j − max x)`` along ``dim`` (SPEC §2).

    Subtracting the max keeps every ``exp`` ≤ 1, so huge inputs stay finite and
    adding a constant along ``dim`` changes nothing. A slice that is entirely
    ``−inf`` (e.g. an attention row with no allowed key) gives all zeros
    instead of NaN: it has nothing to normalise.
    """
    finfo = torch.finfo(x.dtype)
    # subtle: an all −inf slice has max −inf and (−inf) − (−inf) is NaN;
    # clamping the shift to the lowest finite value makes those exps exactly 0.
    # detach: the output does not depend on the shift, so its gradient is
    # exactly zero; without detach autograd would still compute it at full size.
    shift = x.amax(dim=dim, keepdim=True).detach().clamp_min(finfo.min)
    # in-place exp on the fresh temporary saves one allocation (autograd-safe:
    # subtraction's backward does not need its output).
    exps = (x - shift).exp_()
    # Every other slice contains exp(0) = 1, so its sum is ≥ 1 and the clamp is
    # a no-op there; for all −inf slices it turns 0/0 into 0/tiny = 0.
    return exps / exps.sum(dim=dim, keepdim=True).clamp_min(finfo.tiny)
