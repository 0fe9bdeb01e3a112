"""VARIANT: the encdec reference with the heads split and merged by einops
(``b n (h d) -> b h n d``), attention weights by ``einsum``, and LayerNorm
through ``torch.var(unbiased=False)``. Declares nothing: the paper's choices."""

import math

import torch
from einops import einsum, rearrange

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403

VARIANT = {"what": "heads by einops rearrange, einsum scores, torch.var LayerNorm", "profile": "encdec"}


def _forward(self, query, key, value, mask=None):
    h = self.num_heads
    q = rearrange(self.q_proj(query), "b n (h d) -> b h n d", h=h)
    k = rearrange(self.k_proj(key), "b m (h d) -> b h m d", h=h)
    v = rearrange(self.v_proj(value), "b m (h d) -> b h m d", h=h)
    scores = einsum(q, k, "b h n d, b h m d -> b h n m") / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~rearrange(mask, "b n m -> b 1 n m"), float("-inf"))
    out = einsum(torch.softmax(scores, dim=-1), v, "b h n m, b h m d -> b h n d")
    return self.out_proj(rearrange(out, "b h n d -> b n (h d)"))


def _norm(self, x):
    mean = x.mean(-1, keepdim=True)
    var = torch.var(x, dim=-1, keepdim=True, unbiased=False)
    return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


_layers.MultiHeadAttention.forward = _forward
_layers.LayerNorm.forward = _norm
