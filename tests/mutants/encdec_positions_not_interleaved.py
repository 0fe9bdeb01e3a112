"""MUTANT (encdec): sines in the first half, cosines in the second (not interleaved)."""

import torch

from lmspec.reference.encdec import adapter as _adapter
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _positions(max_len, d_model, dtype=torch.float32, device=None):
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(-1)
    angles = pos / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1).to(dtype)


_adapter.sinusoidal_positions = _positions

MUTANT = {
    "spec": "encdec.positions",
    "bug": "sines in the first half, cosines in the second (not interleaved)",
    "run": ["encdec.positions"],
    "profile": "encdec",
    "hinted": ["not interleaved"],
}
