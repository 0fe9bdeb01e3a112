"""VARIANT (gpt2): attention written with einsum over (batch, heads,
tokens, head_dim), the causal mask a registered buffer as in the book, and
LayerNorm's variance as ``torch.var(unbiased=False)``; otherwise the
reference."""

import torch
from torch import nn

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT
from lmspec.reference.gpt2 import TransformerBlock as _Block

VARIANT = {"profile": "gpt2", "what": "einsum attention, mask buffer, var(unbiased=False)", "run": ["gpt2"]}


class LayerNorm(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        return self.scale * (x - mu) / torch.sqrt(torch.var(x, -1, keepdim=True, unbiased=False) + 1e-5) + self.shift


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, t, _ = x.shape
        split = lambda y: y.view(b, t, self.num_heads, -1)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(self.mask[:t, :t].bool(), -torch.inf)
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return self.out_proj(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, -1))


class TransformerBlock(_Block):
    def __init__(self, cfg):
        super().__init__(cfg)
        e = cfg["emb_dim"]
        self.att = MultiHeadAttention(e, e, cfg["context_length"], cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"])
        self.norm1, self.norm2 = LayerNorm(e), LayerNorm(e)


class GPTModel(_GPT):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
