"""VARIANT (gpt2): chapter 3's route: MultiHeadAttention as a wrapper of
single causal heads (each with its own query/key/value Linear(d_in,
head_dim), mask buffer and dropout), concatenated in order, then out_proj.
The module translates the book's weights to its per-head keys
(``lmspec_map_weights``: rows h·head_dim … of each matrix) and loads GPT-2's
c_attn per head in its own ``load_weights_into_gpt``."""

import numpy as np
import torch
from torch import nn

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT
from lmspec.reference.gpt2 import TransformerBlock as _Block
from lmspec.reference.gpt2 import load_weights_into_gpt as _load

VARIANT = {"profile": "gpt2", "what": "MultiHeadAttentionWrapper of causal heads + out_proj", "run": ["gpt2"]}
NAMES = ("W_query", "W_key", "W_value")


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = (q @ k.transpose(1, 2)).masked_fill(self.mask.bool()[:t, :t], -torch.inf)
        return self.dropout(torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)) @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        hd = d_out // num_heads
        self.heads = nn.ModuleList(
            CausalAttention(d_in, hd, context_length, dropout, qkv_bias) for _ in range(num_heads)
        )
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        return self.out_proj(torch.cat([head(x) for head in self.heads], dim=-1))


class TransformerBlock(_Block):
    def __init__(self, cfg):
        super().__init__(cfg)
        e = cfg["emb_dim"]
        self.att = MultiHeadAttention(e, e, cfg["context_length"], cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"])


class GPTModel(_GPT):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])


def lmspec_map_weights(weights, module):
    """The book's (d_out, d_in) projections cut into per-head row blocks."""
    out = {k: v for k, v in weights.items() if not any(f"{n}." in k for n in NAMES)}
    for key, value in weights.items():
        for name in NAMES:
            if f"{name}." in key:
                stem, part = key.split(f"{name}.")
                att = module.get_submodule(stem.rstrip(".")) if stem else module
                for h, chunk in enumerate(value.chunk(len(att.heads))):
                    out[f"{stem}heads.{h}.{name}.{part}"] = chunk
    return out


def load_weights_into_gpt(gpt, params):
    for block in gpt.trf_blocks:  # the reference needs the book's names to run
        e = block.att.out_proj.weight.shape[0]
        for name in NAMES:
            setattr(block.att, name, nn.Linear(e, e, bias=True))
    _load(gpt, params)
    for block, src in zip(gpt.trf_blocks, params["blocks"], strict=True):
        for name in NAMES:
            delattr(block.att, name)
        hd = block.att.heads[0].W_query.weight.shape[0]
        w = np.split(np.asarray(src["attn"]["c_attn"]["w"]), 3, axis=-1)
        b = np.split(np.asarray(src["attn"]["c_attn"]["b"]), 3, axis=-1)
        with torch.no_grad():
            for h, head in enumerate(block.att.heads):
                for i, name in enumerate(NAMES):
                    getattr(head, name).weight.copy_(torch.tensor(w[i][:, h * hd : (h + 1) * hd].T))
                    getattr(head, name).bias.copy_(torch.tensor(b[i][h * hd : (h + 1) * hd]))
