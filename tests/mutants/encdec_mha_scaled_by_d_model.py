"""MUTANT (encdec): attention scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_k).

With d_model 16 over 4 heads, sqrt(d_model) = d_k: the scores are what
scaling by 1/d_k gives, another bug; a second input with d_k² ≠ d_model
tells the two apart (with one head the bug is invisible)."""

import math

import torch

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403


def _forward(self, query, key, value, mask=None):
    q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(key)), self._heads(self.v_proj(value))
    if mask is not None and mask.dim() >= 3:
        mask = mask.unsqueeze(-3)
    scores = q @ k.mT / math.sqrt(q.shape[-1] * self.num_heads)  # the model's width, not the head's
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    out = torch.softmax(scores, dim=-1) @ v
    return self.out_proj(out.transpose(-2, -3).flatten(-2))


_layers.MultiHeadAttention.forward = _forward

MUTANT = {
    "spec": "encdec.mha",
    "bug": "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_k)",
    "run": ["encdec.mha"],
    "profile": "encdec",
    "hinted": ["1/sqrt(d_model) instead of 1/sqrt(d_k)"],
    "never_hinted": ["scaled by 1/d_k instead"],
}
