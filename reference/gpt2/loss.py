"""Batch and loader losses (SPEC §6.1 "calc_loss_batch", "calc_loss_loader")."""

from collections.abc import Iterable
from typing import Any

import torch
from jaxtyping import Float, Integer
from torch import Tensor, nn

from lmspec.reference.training.loss import cross_entropy


def calc_loss_batch(
    input_batch: Integer[Tensor, "batch tokens"],
    target_batch: Integer[Tensor, "batch tokens"],
    model: nn.Module,
    device: torch.device | str,
) -> Float[Tensor, ""]:
    """Mean cross-entropy of the model's logits over every position."""
    logits = model(input_batch.to(device))
    return cross_entropy(logits, target_batch.to(device))


def calc_loss_loader(
    data_loader: Iterable[Any], model: nn.Module, device: torch.device | str, num_batches: int | None = None
) -> float:
    """The mean batch loss over the first ``num_batches`` batches (every batch
    when None); ``nan`` for an empty loader."""
    available = len(data_loader)  # type: ignore[arg-type]
    if available == 0:
        return float("nan")
    count = available if num_batches is None else min(num_batches, available)
    total = 0.0
    for i, (inputs, targets) in enumerate(data_loader):
        if i >= count:
            break
        total += calc_loss_batch(inputs, targets, model, device).item()
    return total / count
