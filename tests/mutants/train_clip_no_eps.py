"""MUTANT: gradient clipping scaling by max_norm / norm (no + 1e-6).

The official test's tolerance (atol 1e-6 on the clipped gradients) admits
it on every input: the missing epsilon moves a clipped gradient by at most
max_norm·1e-6/norm < 1e-6. SPEC §3 makes it a STRICT finding that names the
difference (test_gradient_clipping_epsilon_on_the_norm), never a lost item.
"""

import math

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "3.gradient_clipping",
    "bug": "scale max_norm / norm instead of max_norm / (norm + 1e-6)",
    "run": ["3.gradient_clipping"],
    "strict_only": (
        "another epsilon placement is within the official test's tolerance (SPEC §3: MUST at atol 1e-6, "
        "the epsilon a STRICT finding)"
    ),
    "hinted": ["no epsilon, max_norm/norm"],
}


def run_gradient_clipping(parameters, max_l2_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    if norm > max_l2_norm:
        for g in grads:
            g.mul_(max_l2_norm / norm)  # BUG: no 1e-6
