"""MUTANT (gpt2): Dropout applied to the scores before the softmax instead of to the weights."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import MultiHeadAttention as _MHA

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.mha",
    "bug": "dropout applied to the scores before the softmax instead of to the weights",
    "run": ["gpt2.mha"],
    "hinted": ["dropout on the masked scores before the softmax"],
    "strict_only": (
        "SPEC §6.1: where dropout acts in training mode with drop_rate > 0 is STRICT (the book's placement is "
        "one of several sound ones)"
    ),
}


class MultiHeadAttention(_MHA):
    def forward(self, x):
        b, t, _ = x.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = (p(x).view(b, t, h, d).transpose(1, 2) for p in (self.W_query, self.W_key, self.W_value))
        scores = q @ k.transpose(-2, -1) / d**0.5
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), -torch.inf)
        ctx = torch.softmax(self.dropout(scores), dim=-1) @ v
        return self.out_proj(ctx.transpose(1, 2).reshape(b, t, h * d))
