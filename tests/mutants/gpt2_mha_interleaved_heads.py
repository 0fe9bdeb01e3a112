"""MUTANT (gpt2): Heads as every num_heads-th column (view(b, t, head_dim, heads)) instead of contiguous blocks."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import MultiHeadAttention as _MHA

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.mha",
    "bug": "heads as every num_heads-th column (view(b, t, head_dim, heads)) instead of contiguous blocks",
    "run": ["gpt2.mha"],
    "hinted": ["heads split interleaved"],
}


class MultiHeadAttention(_MHA):
    def forward(self, x):
        b, t, _ = x.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = (p(x).view(b, t, d, h).permute(0, 3, 1, 2) for p in (self.W_query, self.W_key, self.W_value))
        scores = q @ k.transpose(-2, -1) / d**0.5
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), -torch.inf)
        ctx = torch.softmax(scores, dim=-1) @ v
        return self.out_proj(ctx.permute(0, 2, 3, 1).reshape(b, t, h * d))
