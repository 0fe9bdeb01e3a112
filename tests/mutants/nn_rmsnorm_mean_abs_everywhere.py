"""MUTANT: RMSNorm divides by mean |x| instead of the root mean square, and the
block and the LM use that RMSNorm: their failures are the norm's."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.nn.rmsnorm import RMSNorm

MUTANT = {
    "spec": "2.rmsnorm",
    "bug": "x / mean|x| · g, in RMSNorm and so in every block and the LM",
    "run": ["2.rmsnorm", "2.block", "2.lm"],
    "hinted": ["divides by mean |x| instead of the RMS", "explained by 2.rmsnorm (fix that first)"],
    "never_hinted": [
        "explained by 2.mha",
        "explained by 2.swiglu",
        "explained by 2.embedding",
        "explained by 2.linear",
    ],
}


def _forward(self, x):
    in_dtype = x.dtype
    h = x.to(torch.promote_types(in_dtype, torch.float32))
    return (h / (h.abs().mean(dim=-1, keepdim=True) + self.eps) * self.weight.to(h.dtype)).to(in_dtype)


RMSNorm.forward = _forward
