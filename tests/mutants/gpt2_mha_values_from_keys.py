"""MUTANT (gpt2): Values projected with W_key (copy-paste slip)."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import MultiHeadAttention as _MHA

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.mha",
    "bug": "values projected with W_key (copy-paste slip)",
    "run": ["gpt2.mha"],
    "hinted": ["values projected with W_key"],
}


class MultiHeadAttention(_MHA):
    def forward(self, x):
        b, t, _ = x.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = (p(x).view(b, t, h, d).transpose(1, 2) for p in (self.W_query, self.W_key, self.W_key))
        scores = q @ k.transpose(-2, -1) / d**0.5
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), -torch.inf)
        ctx = self.dropout(torch.softmax(scores, dim=-1)) @ v
        return self.out_proj(ctx.transpose(1, 2).reshape(b, t, h * d))
