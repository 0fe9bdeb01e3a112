"""MUTANT (gpt2): F.dropout(training=True) on the weights: dropout stays active in eval mode."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import MultiHeadAttention as _MHA

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.mha",
    "bug": "F.dropout(training=True) on the weights: dropout stays active in eval mode",
    "run": ["gpt2.mha"],
    "hinted": ["dropout on the attention weights active in eval mode"],
}


class MultiHeadAttention(_MHA):
    def forward(self, x):
        b, t, _ = x.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = (p(x).view(b, t, h, d).transpose(1, 2) for p in (self.W_query, self.W_key, self.W_value))
        scores = q @ k.transpose(-2, -1) / d**0.5
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), -torch.inf)
        w = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), self.dropout.p, training=True)
        return self.out_proj((w @ v).transpose(1, 2).reshape(b, t, h * d))
