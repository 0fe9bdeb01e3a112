"""MUTANT: gradient clipping that assigns scaled copies to p.grad instead of scaling in place."""

import math

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.gradient_clipping",
    "bug": "p.grad = p.grad * scale: the gradient tensors the caller holds are left unscaled",
    "run": ["3.gradient_clipping"],
    "hinted": ["instead of scaled in place"],
}


def run_gradient_clipping(parameters, max_l2_norm):
    params = [p for p in parameters if p.grad is not None]
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params))
    if norm > max_l2_norm:
        for p in params:
            p.grad = p.grad * (max_l2_norm / (norm + 1e-6))  # BUG: not in place
