"""VARIANT: the encdec reference with multi-head attention written as many
from-scratch notes write it: one fused (3·d_model, d_model) projection made
by stacking W_q, W_k, W_v (each input projected and its third kept), masked
scores filled with −1e9 (the annotated notes' value) through masked_fill,
heads split by ``view`` + ``transpose`` and merged back with
``contiguous().view``, torch.softmax. Declares nothing: the paper's choices."""

import math

import torch

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403

VARIANT = {"what": "fused QKV projection, −1e9 masked_fill, heads by view", "profile": "encdec"}


def _forward(self, query, key, value, mask=None):
    d_model = self.q_proj.weight.shape[0]
    w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
    b = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
    q = (query @ w.T + b)[..., :d_model]
    k = (key @ w.T + b)[..., d_model : 2 * d_model]
    v = (value @ w.T + b)[..., 2 * d_model :]
    batch, n, m, h = query.shape[0], query.shape[1], key.shape[1], self.num_heads
    d_k = d_model // h
    q = q.view(batch, n, h, d_k).transpose(1, 2)
    k = k.view(batch, m, h, d_k).transpose(1, 2)
    v = v.view(batch, m, h, d_k).transpose(1, 2)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask.unsqueeze(1) == 0, -1e9)
    out = torch.matmul(torch.softmax(scores, dim=-1), v)
    return self.out_proj(out.transpose(1, 2).contiguous().view(batch, n, d_model))


_layers.MultiHeadAttention.forward = _forward


def run_attention(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.matmul(torch.softmax(scores, dim=-1), V)
