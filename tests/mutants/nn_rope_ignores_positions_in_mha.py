"""MUTANT: RoPE ignores token_positions (rotates by 0..seq-1), and MHA uses
that RoPE: MHA at other positions fails because of it."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.nn.rope import RotaryPositionalEmbedding

MUTANT = {
    "spec": "2.rope",
    "bug": "token_positions ignored in RoPE, and so in MHA with RoPE",
    "run": ["2.rope", "2.mha"],
    "hinted": ["token_positions ignored", "explained by 2.rope (fix that first)"],
    "never_hinted": ["explained by 2.sdpa"],
}

_forward = RotaryPositionalEmbedding.forward


def _ignoring_positions(self, x, token_positions=None):
    return _forward(self, x, torch.arange(x.shape[-2], device=x.device))


RotaryPositionalEmbedding.forward = _ignoring_positions
