"""MUTANT: gradient clipping by each parameter's own norm."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.gradient_clipping",
    "bug": "each gradient clipped by its own L2 norm instead of one global norm",
    "run": ["3.gradient_clipping"],
    "hinted": ["clipped each parameter by its own norm"],
    # test_gradient_clipping_uses_one_global_norm: every parameter's own norm is below
    # max_norm, so clipping each by its own norm gives exactly the unscaled gradients
    "also_named": ["gradients left unscaled although the global norm of all of them exceeds max_norm"],
}


def run_gradient_clipping(parameters, max_l2_norm):
    for p in parameters:
        if p.grad is None:
            continue
        norm = float(torch.linalg.vector_norm(p.grad))  # BUG: per parameter
        if norm > max_l2_norm:
            p.grad.mul_(max_l2_norm / (norm + 1e-6))
