"""VARIANT (gpt2): one fused ``qkv`` Linear(d_in, 3·d_out) instead of the
book's three projections (one matmul, then a split into query, key, value).
Its state dict differs from the book's, so the module says how to translate
(``lmspec_map_weights``: the three weights stacked), and its own
``load_weights_into_gpt`` copies GPT-2's fused ``c_attn`` in one piece.
Everything else is the reference's."""

import numpy as np
import torch
from torch import nn

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT
from lmspec.reference.gpt2 import TransformerBlock as _Block
from lmspec.reference.gpt2 import load_weights_into_gpt as _load

VARIANT = {"profile": "gpt2", "what": "fused QKV projection with a weight-map hook", "run": ["gpt2"]}


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.h, self.hd, self.ctx = num_heads, d_out // num_heads, context_length
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) * self.hd**-0.5
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        weights = self.dropout(scores.masked_fill(future, float("-inf")).softmax(-1))
        return self.out_proj((weights @ v).transpose(1, 2).reshape(b, t, self.h * self.hd))


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
    """The book's W_query/W_key/W_value stacked into qkv (weights and biases)."""
    out = {}
    for key, value in weights.items():
        for part in ("weight", "bias"):
            if key.endswith(f"W_query.{part}"):
                stem = key[: -len(f"W_query.{part}")]
                out[f"{stem}qkv.{part}"] = torch.cat(
                    [weights[f"{stem}W_{n}.{part}"] for n in ("query", "key", "value")]
                )
        if not any(s in key for s in ("W_query.", "W_key.", "W_value.")):
            out[key] = value
    return out


def load_weights_into_gpt(gpt, params):
    # the reference loads everything but attention; c_attn goes in as one fused matrix
    for block in gpt.trf_blocks:
        d_out = block.att.out_proj.weight.shape[0]
        block.att.W_query = nn.Linear(block.att.qkv.in_features, d_out, bias=True)
        block.att.W_key = nn.Linear(block.att.qkv.in_features, d_out, bias=True)
        block.att.W_value = nn.Linear(block.att.qkv.in_features, d_out, bias=True)
    _load(gpt, params)
    for block, src in zip(gpt.trf_blocks, params["blocks"], strict=True):
        with torch.no_grad():
            block.att.qkv.weight.copy_(torch.tensor(np.asarray(src["attn"]["c_attn"]["w"]).T))
            block.att.qkv.bias.copy_(torch.tensor(np.asarray(src["attn"]["c_attn"]["b"])))
        del block.att.W_query, block.att.W_key, block.att.W_value
