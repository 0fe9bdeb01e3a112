"""LayerNorm with scale and shift, the tanh GELU, the feed-forward network (SPEC §6.1)."""

import math
from collections.abc import Mapping
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

#: The book's epsilon, added to the variance inside the square root.
LAYERNORM_EPS = 1e-5
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


class LayerNorm(nn.Module):
    """``scale · (x − mean) / sqrt(var + eps) + shift`` over the last axis.

    The variance is the biased one (divided by n, not n − 1), as GPT-2's
    checkpoint was trained with; ``scale`` starts at ones, ``shift`` at zeros.
    """

    def __init__(self, emb_dim: int, eps: float = LAYERNORM_EPS) -> None:
        super().__init__()
        if emb_dim <= 0:
            raise ValueError(f"emb_dim ({emb_dim}) must be positive")
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x: Float[Tensor, "... emb_dim"]) -> Float[Tensor, "... emb_dim"]:
        mean = x.mean(dim=-1, keepdim=True)
        centred = x - mean
        var = centred.square().mean(dim=-1, keepdim=True)  # biased: divide by n
        return self.scale * centred * torch.rsqrt(var + self.eps) + self.shift


def gelu_tanh(x: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    """``0.5 x (1 + tanh(sqrt(2/π)(x + 0.044715 x³)))``: GPT-2's approximation
    (it differs from the exact ``x Φ(x)`` by up to ~5e-4)."""
    return 0.5 * x * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x.pow(3))))


class GELU(nn.Module):
    """The tanh approximation of GELU, as a module (no parameters)."""

    def forward(self, x: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
        return gelu_tanh(x)


class FeedForward(nn.Module):
    """``Linear(E, 4E)`` → GELU → ``Linear(4E, E)``, both with biases; the
    state-dict keys are ``layers.0.*`` and ``layers.2.*`` as in the book."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        super().__init__()
        emb_dim = int(cfg["emb_dim"])
        self.layers = nn.Sequential(nn.Linear(emb_dim, 4 * emb_dim), GELU(), nn.Linear(4 * emb_dim, emb_dim))

    def forward(self, x: Float[Tensor, "... emb_dim"]) -> Float[Tensor, "... emb_dim"]:
        return self.layers(x)
