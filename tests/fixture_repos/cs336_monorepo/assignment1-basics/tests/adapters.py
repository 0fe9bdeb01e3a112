from __future__ import annotations

import torch

from cs336_basics.layers import Linear, silu, softmax


def run_linear(d_in: int, d_out: int, weights: torch.Tensor, in_features: torch.Tensor) -> torch.Tensor:
    layer = Linear(d_in, d_out)
    layer.load_state_dict({"weight": weights})
    return layer(in_features)


def run_silu(in_features: torch.Tensor) -> torch.Tensor:
    return silu(in_features)


def run_softmax(in_features: torch.Tensor, dim: int) -> torch.Tensor:
    return softmax(in_features, dim)
