"""MUTANT (gpt2): Scores divided by sqrt(d_out) instead of sqrt(head_dim)."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import MultiHeadAttention as _MHA

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.mha",
    "bug": "scores divided by sqrt(d_out) instead of sqrt(head_dim)",
    "run": ["gpt2.mha"],
    "hinted": ["scores divided by sqrt(d_out)"],
}


class MultiHeadAttention(_MHA):
    def forward(self, x):
        b, t, _ = x.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = (p(x).view(b, t, h, d).transpose(1, 2) for p in (self.W_query, self.W_key, self.W_value))
        scores = q @ k.transpose(-2, -1) / self.d_out**0.5
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), -torch.inf)
        ctx = self.dropout(torch.softmax(scores, dim=-1)) @ v
        return self.out_proj(ctx.transpose(1, 2).reshape(b, t, h * d))
