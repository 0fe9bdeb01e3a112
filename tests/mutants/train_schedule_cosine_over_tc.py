"""MUTANT: cosine progress divided by T_c instead of T_c - T_w."""

import math

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.cosine_schedule",
    "bug": ("cosine progress (t - T_w) / T_c instead of (t - T_w) / (T_c - T_w): not alpha_min at T_c"),
    "run": ["3.cosine_schedule"],
    "hinted": ["cosine progress over T_c instead of T_c − T_w"],
}


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return max_learning_rate * it / warmup_iters
    if it > cosine_cycle_iters:
        return min_learning_rate
    progress = (it - warmup_iters) / cosine_cycle_iters  # BUG
    return min_learning_rate + 0.5 * (1 + math.cos(math.pi * progress)) * (max_learning_rate - min_learning_rate)
