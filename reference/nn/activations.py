"""Elementwise activations (SPEC §2 "SiLU")."""

import torch
from jaxtyping import Float
from torch import Tensor


def silu(x: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    """``SiLU(x) = x · σ(x)`` (SPEC §2), elementwise."""
    return x * torch.sigmoid(x)
