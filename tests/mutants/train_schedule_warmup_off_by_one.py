"""MUTANT: cosine schedule whose warmup is one step ahead (alpha_max * (t + 1) / T_w)."""

import math

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.cosine_schedule",
    "bug": "warmup off by one: alpha_max * (t + 1) / T_w",
    "run": ["3.cosine_schedule"],
    "hinted": ["warmup off by one"],
}


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return max_learning_rate * (it + 1) / warmup_iters  # BUG
    if it > cosine_cycle_iters:
        return min_learning_rate
    progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
    return min_learning_rate + 0.5 * (1 + math.cos(math.pi * progress)) * (max_learning_rate - min_learning_rate)
