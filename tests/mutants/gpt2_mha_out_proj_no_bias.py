"""MUTANT (gpt2): Out_proj built with bias=False (the GPT-2 checkpoint has c_proj.b)."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import MultiHeadAttention as _MHA

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.mha",
    "bug": "out_proj built with bias=False (the GPT-2 checkpoint has c_proj.b)",
    "run": ["gpt2.mha"],
}


class MultiHeadAttention(_MHA):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.out_proj = torch.nn.Linear(d_out, d_out, bias=False)
