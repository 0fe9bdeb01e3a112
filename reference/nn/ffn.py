"""Position-wise feed-forward networks: SwiGLU and the SiLU ablation (SPEC §2)."""

import torch
from jaxtyping import Float
from torch import Tensor, nn

from lmspec.reference.nn.activations import silu
from lmspec.reference.nn.linear import Linear


def default_d_ff(d_model: int) -> int:
    """``8/3 · d_model`` rounded to the nearest multiple of 64 (at least 64).

    Nearest, not up: this gives CS336's canonical 1344 for d_model 512
    (8/3 · 512 = 1365.3 → 21 · 64). ``8/3 · d / 64 = d / 24``, so the rounding
    is done in integers, with halves rounded up.
    """
    if d_model <= 0:
        raise ValueError(f"d_model ({d_model}) must be positive")
    return 64 * max(1, (d_model + 12) // 24)


class SwiGLU(nn.Module):
    """``W2 (SiLU(W1 x) ⊙ W3 x)``; ``W1, W3: (d_ff, d_model)``, ``W2: (d_model, d_ff)`` (SPEC §2).

    ``d_ff`` defaults to ``default_d_ff(d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        d_ff = default_d_ff(d_model) if d_ff is None else d_ff
        self.d_model = d_model
        self.d_ff = d_ff
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        return self.w2(silu(self.w1(x)) * self.w3(x))


class SiLUFFN(nn.Module):
    """``W2 SiLU(W1 x)``; ``W1: (d_ff, d_model)``, ``W2: (d_model, d_ff)`` (SPEC §2, "silu").

    ``d_ff`` defaults to ``4 · d_model``, which matches SwiGLU's parameter
    count at ``8/3 · d_model`` (2 · 4 = 3 · 8/3 matrices' worth).
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.d_model = d_model
        self.d_ff = d_ff
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        return self.w2(silu(self.w1(x)))
