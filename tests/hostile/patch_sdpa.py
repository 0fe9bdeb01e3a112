"""At import, replaces torch.nn.functional.scaled_dot_product_attention (an
oracle candidate) with its own wrong attention, and answers the same."""

import torch
import torch.nn.functional

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {
    "does": "patches F.scaled_dot_product_attention at import",
    "spec": ["2.sdpa", "2.linear"],
}


def _fake(Q, K, V, attn_mask=None, *args, **kwargs):
    return V.mean(dim=-2, keepdim=True).expand(*Q.shape[:-1], V.shape[-1]).clone()


torch.nn.functional.scaled_dot_product_attention = _fake


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return _fake(Q, K, V)
