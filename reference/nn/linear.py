"""Bias-free linear layer, ``y = x Wᵀ`` (SPEC §2 "Linear")."""

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn


class Linear(nn.Module):
    """``y = x Wᵀ`` with ``W`` of shape ``(d_out, d_in)`` and no bias (SPEC §2).

    Init: truncated normal, mean 0, variance ``2 / (d_in + d_out)``, cut at ±3σ.
    The state-dict key is ``weight`` so CS336 weights load unchanged.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if d_in <= 0 or d_out <= 0:
            raise ValueError(f"d_in ({d_in}) and d_out ({d_out}) must be positive")
        self.d_in = d_in
        self.d_out = d_out
        self.weight = nn.Parameter(torch.empty(d_out, d_in, device=device, dtype=dtype))
        std = math.sqrt(2.0 / (d_in + d_out))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3.0 * std, b=3.0 * std)

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_out"]:
        # `@` with the transposed view: matmul reads W in place, no copy.
        return x @ self.weight.T

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}"
