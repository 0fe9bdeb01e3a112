"""Cosine learning-rate schedule with linear warmup (SPEC §3), a pure function."""

import math

__all__ = ["cosine_lr"]


def cosine_lr(
    t: int,
    alpha_max: float | int,
    alpha_min: float | int,
    warmup_iters: int,
    cosine_cycle_iters: int,
) -> float:
    """Learning rate at iteration ``t`` (SPEC §3 cosine schedule).

    ``t < T_w``: ``α_max·t/T_w``; ``T_w ≤ t ≤ T_c``:
    ``α_min + ½(1 + cos(π(t − T_w)/(T_c − T_w)))(α_max − α_min)``; ``t > T_c``: ``α_min``.

    Edge cases (no division by zero): with ``T_w == 0`` there is no warmup and
    ``t = 0`` already gives ``α_max``; with ``T_c == T_w`` the cosine phase is
    the single iteration ``t = T_w``, where the progress ``(t − T_w)/(T_c − T_w)``
    is taken as 0 (value ``α_max``), and every later ``t`` gives ``α_min``.

    Raises:
        ValueError: ``t`` or an iteration count negative, ``T_w > T_c``, or a
            negative learning rate (each named with its value).
    """
    if t < 0:
        raise ValueError(f"iteration t must be >= 0, got {t}")
    if warmup_iters < 0:
        raise ValueError(f"warmup_iters must be >= 0, got {warmup_iters}")
    if cosine_cycle_iters < warmup_iters:
        raise ValueError(f"cosine_cycle_iters ({cosine_cycle_iters}) must be >= warmup_iters ({warmup_iters})")
    if alpha_max < 0 or alpha_min < 0:
        raise ValueError(f"learning rates must be >= 0, got alpha_max={alpha_max}, alpha_min={alpha_min}")
    if t < warmup_iters:
        return float(alpha_max * t / warmup_iters)
    if t > cosine_cycle_iters:
        return float(alpha_min)
    span = cosine_cycle_iters - warmup_iters
    progress = (t - warmup_iters) / span if span > 0 else 0.0
    return float(alpha_min + 0.5 * (1.0 + math.cos(math.pi * progress)) * (alpha_max - alpha_min))
