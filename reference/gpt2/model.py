"""The pre-norm block and the GPT model (SPEC §6.1 "TransformerBlock", "GPTModel")."""

from collections.abc import Mapping
from typing import Any

import torch
from jaxtyping import Float, Integer
from torch import Tensor, nn

from lmspec.reference.gpt2.attention import MultiHeadAttention
from lmspec.reference.gpt2.layers import FeedForward, LayerNorm

#: GPT-2 small (124M parameters with the head tied, 163M untied).
GPT_CONFIG_124M: dict[str, Any] = {
    "vocab_size": 50257,
    "context_length": 1024,
    "emb_dim": 768,
    "n_heads": 12,
    "n_layers": 12,
    "drop_rate": 0.1,
    "qkv_bias": False,
}
CFG_KEYS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias")


def check_cfg(cfg: Mapping[str, Any]) -> None:
    """Every key the book's configuration has (a clear error naming the missing ones)."""
    missing = [k for k in CFG_KEYS if k not in cfg]
    if missing:
        raise KeyError(f"cfg lacks {missing} (a gpt2 cfg has {', '.join(CFG_KEYS)})")


class TransformerBlock(nn.Module):
    """``x + drop(att(norm1(x)))``, then ``x + drop(ff(norm2(x)))``."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        super().__init__()
        check_cfg(cfg)
        emb_dim = int(cfg["emb_dim"])
        self.att = MultiHeadAttention(
            d_in=emb_dim,
            d_out=emb_dim,
            context_length=int(cfg["context_length"]),
            dropout=float(cfg["drop_rate"]),
            num_heads=int(cfg["n_heads"]),
            qkv_bias=bool(cfg["qkv_bias"]),
        )
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(emb_dim)
        self.norm2 = LayerNorm(emb_dim)
        self.drop_shortcut = nn.Dropout(float(cfg["drop_rate"]))

    def forward(self, x: Float[Tensor, "*batch tokens emb_dim"]) -> Float[Tensor, "*batch tokens emb_dim"]:
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))


class GPTModel(nn.Module):
    """Token plus learned position embeddings, dropout, ``n_layers`` blocks,
    a final LayerNorm and a bias-free output head (its own weight: tied only
    when ``load_weights_into_gpt`` copies ``wte`` into it)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        super().__init__()
        check_cfg(cfg)
        vocab, emb_dim = int(cfg["vocab_size"]), int(cfg["emb_dim"])
        self.context_length = int(cfg["context_length"])
        self.tok_emb = nn.Embedding(vocab, emb_dim)
        self.pos_emb = nn.Embedding(self.context_length, emb_dim)
        self.drop_emb = nn.Dropout(float(cfg["drop_rate"]))
        self.trf_blocks = nn.Sequential(*(TransformerBlock(cfg) for _ in range(int(cfg["n_layers"]))))
        self.final_norm = LayerNorm(emb_dim)
        self.out_head = nn.Linear(emb_dim, vocab, bias=False)

    def forward(self, in_idx: Integer[Tensor, "*batch tokens"]) -> Float[Tensor, "*batch tokens vocab"]:
        tokens = in_idx.shape[-1]
        if tokens > self.context_length:
            raise ValueError(f"{tokens} tokens exceed context_length {self.context_length}")
        positions = torch.arange(tokens, device=in_idx.device)
        x = self.drop_emb(self.tok_emb(in_idx) + self.pos_emb(positions))
        return self.out_head(self.final_norm(self.trf_blocks(x)))
