"""VARIANT (gpt2): the reader's chapter-4 code with the causal mask built
on the fly in forward (no buffer: ``torch.triu(torch.ones(t, t), 1).bool()``),
LayerNorm's variance as an explicit mean of squared deviations, GELU with
``math`` constants, and Dropout as ``F.dropout(training=self.training)``."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT
from lmspec.reference.gpt2 import TransformerBlock as _Block

VARIANT = {"profile": "gpt2", "what": "mask built per call, mean-of-squares variance, F.dropout", "run": ["gpt2"]}


class LayerNorm(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        centred = x - x.mean(dim=-1, keepdim=True)
        var = (centred * centred).mean(dim=-1, keepdim=True)
        return centred / (var + self.eps).sqrt() * self.scale + self.shift


class GELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads, self.head_dim, self.p = num_heads, d_out // num_heads, dropout
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.W_query(x).reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        k = self.W_key(x).reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 3, 1)
        v = self.W_value(x).reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        mask = torch.triu(torch.ones(t, t, device=x.device), diagonal=1).bool()
        scores = (q @ k).masked_fill(mask, float("-inf")) / math.sqrt(self.head_dim)
        weights = F.dropout(torch.softmax(scores, dim=-1), self.p, training=self.training)
        return self.out_proj((weights @ v).permute(0, 2, 1, 3).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        e = cfg["emb_dim"]
        self.layers = nn.Sequential(nn.Linear(e, 4 * e), GELU(), nn.Linear(4 * e, e))

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(_Block):
    def __init__(self, cfg):
        super().__init__(cfg)
        e = cfg["emb_dim"]
        self.att = MultiHeadAttention(e, e, cfg["context_length"], cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"])
        self.ff = FeedForward(cfg)
        self.norm1, self.norm2 = LayerNorm(e), LayerNorm(e)


class GPTModel(_GPT):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
