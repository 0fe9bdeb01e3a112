"""MUTANT: gradient clipping scaling by max_norm / norm (no + 1e-6)."""

import math

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.gradient_clipping",
    "bug": "scale max_norm / norm instead of max_norm / (norm + 1e-6)",
    "run": ["3.gradient_clipping"],
}


def run_gradient_clipping(parameters, max_l2_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    if norm > max_l2_norm:
        for g in grads:
            g.mul_(max_l2_norm / norm)  # BUG: no 1e-6
