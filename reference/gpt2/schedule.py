"""The book's appendix: warmup + cosine learning rate with clipping after
warmup, and the parameter count with and without the tied head (SPEC §6.1
"Extended")."""

import math

from torch import nn


def get_lr_and_clip(
    global_step: int,
    initial_lr: float,
    peak_lr: float,
    min_lr: float,
    warmup_steps: int,
    total_training_steps: int,
) -> tuple[float, bool]:
    """The learning rate at ``global_step`` and whether gradients are clipped there.

    Warmup (``step < warmup_steps``): linear from ``initial_lr`` by
    ``(peak_lr − initial_lr) / warmup_steps`` per step. After: cosine from
    ``peak_lr`` down to ``min_lr`` at ``total_training_steps``. Clipping
    (to norm 1.0 in the book) applies once warmup is over: ``step > warmup_steps``
    (the book's printings differ on ``>`` and ``≥``; both are accepted).
    """
    if global_step < warmup_steps:
        lr = initial_lr + global_step * (peak_lr - initial_lr) / warmup_steps
    else:
        progress = (global_step - warmup_steps) / max(1, total_training_steps - warmup_steps)
        lr = min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return float(lr), global_step > warmup_steps


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """``(all parameters, all but the output head)``: GPT-2 small's are
    163,009,536 and 124,412,160 (its head has the token embedding's shape)."""
    total = sum(p.numel() for p in model.parameters())
    return total, total - model.out_head.weight.numel()
