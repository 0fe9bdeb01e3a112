"""VARIANT: gradient clipping written like many real repositories: the
global norm as ``sqrt(Σg² + 1e-8)`` (the epsilon inside the square root, not
the handout's ``+ 1e-6`` on the norm), the squares summed in float32 with
``torch.stack``, and the scale applied with ``torch._foreach_mul_``-free plain
in-place multiplication.

The official CS336 test passes it (atol 1e-6 on the clipped gradients): the
MUST verdict must not be stricter (SPEC §3), so this implementation scores
full marks; the epsilon placement is a STRICT finding that names it
(test_gradient_clipping_epsilon_on_the_norm). Everything else comes from the
reference adapter.
"""

import torch

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {
    "what": "gradient clipping with the epsilon inside the square root, sqrt(sum g^2 + 1e-8)",
    "run": ["3.gradient_clipping"],
}


def run_gradient_clipping(parameters, max_l2_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    total = torch.sqrt(torch.stack([(g.float() ** 2).sum() for g in grads]).sum() + 1e-8)
    if total > max_l2_norm:
        factor = max_l2_norm / total
        for g in grads:
            g.mul_(factor.to(g.dtype))
