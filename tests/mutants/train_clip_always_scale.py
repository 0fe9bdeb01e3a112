"""MUTANT: gradient clipping that rescales even below the threshold (normalises to max_norm)."""

import math

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.gradient_clipping",
    "bug": "scale by max_norm / (norm + 1e-6) always, also when norm <= max_norm (grads grow)",
    "run": ["3.gradient_clipping"],
    "hinted": ["scaled even when the global norm is below max_norm"],
}


def run_gradient_clipping(parameters, max_l2_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    for g in grads:  # BUG: no "if norm > max_l2_norm"
        g.mul_(max_l2_norm / (norm + 1e-6))
