"""MUTANT (encdec): exponent i/d instead of 2i/d."""

import torch

from lmspec.reference.encdec import adapter as _adapter
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _positions(max_len, d_model, dtype=torch.float32, device=None):
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(-1)
    angles = pos / torch.pow(10000.0, torch.arange(0, d_model // 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe.to(dtype)


_adapter.sinusoidal_positions = _positions

MUTANT = {
    "spec": "encdec.positions",
    "bug": "exponent i/d instead of 2i/d",
    "run": ["encdec.positions"],
    "profile": "encdec",
    "hinted": ["frequency exponent i/d instead of 2i/d"],
}
