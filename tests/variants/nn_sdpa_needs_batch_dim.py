"""VARIANT: scaled dot-product attention written with batched matrix products
(torch.bmm over the flattened leading dims), which needs at least one leading
batch dimension: 2-D (n, d) inputs raise a ValueError. The contract only
passes (batch, n, d) and (batch, heads, n, d), so every MUST test passes; the
STRICT any-rank test fails, as it should. Everything else comes from the
reference adapter.
"""

import math

import torch

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {"what": "SDPA by torch.bmm, requires a leading batch dim", "run": ["2.sdpa"]}


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    if Q.dim() < 3:
        raise ValueError(f"Q must be (batch, ..., n, d_k); got shape {tuple(Q.shape)}")
    lead, n, m = Q.shape[:-2], Q.shape[-2], K.shape[-2]
    q, k, v = Q.reshape(-1, n, Q.shape[-1]), K.reshape(-1, m, K.shape[-1]), V.reshape(-1, m, V.shape[-1])
    scores = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(Q.shape[-1]))
    if mask is not None:
        allowed = mask.expand(*lead, n, m).reshape(-1, n, m)
        scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp()
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return torch.bmm(weights, v).reshape(*lead, n, V.shape[-1])
