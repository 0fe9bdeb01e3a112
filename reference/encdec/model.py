"""Encoder and decoder layers (post- and pre-norm), the full encoder–decoder
model and greedy decoding (SPEC §6.2).

State-dict keys: ``src_embed.weight``, ``tgt_embed.weight``,
``encoder.layers.{i}.{self_attn,ffn,norm1,norm2}.*``,
``decoder.layers.{i}.{self_attn,cross_attn,ffn,norm1,norm2,norm3}.*``,
pre-norm only: ``encoder.norm.*``, ``decoder.norm.*``; ``generator.weight``.
"""

import math
from collections.abc import Callable

import torch
from jaxtyping import Bool, Float, Integer
from torch import Tensor, nn

from lmspec.reference.encdec.conventions import PAPER, Conventions
from lmspec.reference.encdec.layers import (
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    causal_mask,
    sinusoidal_positions,
)
from lmspec.reference.nn.embedding import Embedding
from lmspec.reference.nn.linear import Linear as BiasFreeLinear

Factory = dict[str, torch.device | str | torch.dtype | None]


def _residual(
    x: Float[Tensor, "... d_model"],
    norm: LayerNorm,
    sublayer: Callable[[Tensor], Tensor],
    drop: nn.Dropout,
    pre: bool,
) -> Float[Tensor, "... d_model"]:
    """Post-norm ``LN(x + drop(sublayer(x)))``; pre-norm ``x + drop(sublayer(LN(x)))``."""
    if pre:
        return x + drop(sublayer(norm(x)))
    return norm(x + drop(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention under the source mask, then the FFN, each in a residual block."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, conventions: Conventions = PAPER, dropout: float = 0.0, **f
    ) -> None:
        super().__init__()
        c = conventions
        self.pre = c.norm == "pre"
        self.self_attn = MultiHeadAttention(d_model, num_heads, c.masked_row, **f, bias=c.attention_bias)
        self.ffn = FeedForward(d_model, d_ff, c.activation, **f)
        self.norm1, self.norm2 = (LayerNorm(d_model, c.layer_norm, **f) for _ in range(2))
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: Float[Tensor, "... src_len d_model"], src_mask: Bool[Tensor, "..."] | None
    ) -> Float[Tensor, "... src_len d_model"]:
        x = _residual(x, self.norm1, lambda h: self.self_attn(h, h, h, src_mask), self.drop, self.pre)
        return _residual(x, self.norm2, self.ffn, self.drop, self.pre)


class DecoderLayer(nn.Module):
    """Masked self-attention (target mask), cross-attention (queries from the
    decoder, keys and values from the encoder's output, source mask), the FFN."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, conventions: Conventions = PAPER, dropout: float = 0.0, **f
    ) -> None:
        super().__init__()
        c = conventions
        self.pre = c.norm == "pre"
        self.self_attn = MultiHeadAttention(d_model, num_heads, c.masked_row, **f, bias=c.attention_bias)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, c.masked_row, **f, bias=c.attention_bias)
        self.ffn = FeedForward(d_model, d_ff, c.activation, **f)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model, c.layer_norm, **f) for _ in range(3))
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        x: Float[Tensor, "... tgt_len d_model"],
        memory: Float[Tensor, "... src_len d_model"],
        src_mask: Bool[Tensor, "..."] | None,
        tgt_mask: Bool[Tensor, "..."] | None,
    ) -> Float[Tensor, "... tgt_len d_model"]:
        x = _residual(x, self.norm1, lambda h: self.self_attn(h, h, h, tgt_mask), self.drop, self.pre)
        x = _residual(x, self.norm2, lambda h: self.cross_attn(h, memory, memory, src_mask), self.drop, self.pre)
        return _residual(x, self.norm3, self.ffn, self.drop, self.pre)


class Stack(nn.Module):
    """N encoder or decoder layers; pre-norm adds a final LayerNorm (``norm``)."""

    def __init__(self, num_layers: int, make_layer: Callable[[], nn.Module], final_norm: LayerNorm | None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(make_layer() for _ in range(num_layers))
        self.norm = final_norm

    def forward(self, x: Tensor, *masks: Tensor | None, memory: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, *masks) if memory is None else layer(x, memory, *masks)
        return x if self.norm is None else self.norm(x)


class EncoderDecoder(nn.Module):
    """Embeddings × sqrt(d_model) + sinusoidal positions → encoder; the same for
    the target → decoder over the encoder's output → ``generator`` (no bias) to
    target logits, or their log-softmax when the conventions say ``log_probs``."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        conventions: Conventions = PAPER,
        dropout: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        f: Factory = {"device": device, "dtype": dtype}
        c = conventions
        self.conventions = c
        self.d_model = d_model
        pre = c.norm == "pre"
        self.src_embed = Embedding(src_vocab_size, d_model, **f)
        self.tgt_embed = Embedding(tgt_vocab_size, d_model, **f)
        self.encoder = Stack(
            num_layers,
            lambda: EncoderLayer(d_model, num_heads, d_ff, c, dropout, **f),
            LayerNorm(d_model, c.layer_norm, **f) if pre else None,
        )
        self.decoder = Stack(
            num_layers,
            lambda: DecoderLayer(d_model, num_heads, d_ff, c, dropout, **f),
            LayerNorm(d_model, c.layer_norm, **f) if pre else None,
        )
        self.generator = BiasFreeLinear(d_model, tgt_vocab_size, **f)
        self.drop = nn.Dropout(dropout)
        for p in self.parameters():  # the annotated notes' Xavier init of every matrix
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def _embed(self, table: Embedding, ids: Integer[Tensor, "batch len"]) -> Float[Tensor, "batch len d_model"]:
        x = table(ids) * math.sqrt(self.d_model)
        pe = sinusoidal_positions(ids.shape[-1], self.d_model, dtype=x.dtype, device=x.device)
        return self.drop(x + pe)

    def encode(
        self, src: Integer[Tensor, "batch src_len"], src_mask: Bool[Tensor, "..."] | None
    ) -> Float[Tensor, "batch src_len d_model"]:
        return self.encoder(self._embed(self.src_embed, src), src_mask)

    def decode(
        self,
        memory: Float[Tensor, "batch src_len d_model"],
        src_mask: Bool[Tensor, "..."] | None,
        tgt: Integer[Tensor, "batch tgt_len"],
        tgt_mask: Bool[Tensor, "..."] | None,
    ) -> Float[Tensor, "batch tgt_len d_model"]:
        return self.decoder(self._embed(self.tgt_embed, tgt), src_mask, tgt_mask, memory=memory)

    def generate(self, hidden: Float[Tensor, "... d_model"]) -> Float[Tensor, "... tgt_vocab"]:
        logits = self.generator(hidden)
        if self.conventions.output == "log_probs":
            return logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        return logits

    def forward(
        self,
        src: Integer[Tensor, "batch src_len"],
        tgt: Integer[Tensor, "batch tgt_len"],
        src_mask: Bool[Tensor, "..."] | None,
        tgt_mask: Bool[Tensor, "..."] | None,
    ) -> Float[Tensor, "batch tgt_len tgt_vocab"]:
        return self.generate(self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask))


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoder,
    src: Integer[Tensor, "batch src_len"],
    src_mask: Bool[Tensor, "..."] | None,
    max_len: int,
    start_id: int,
    end_id: int | None = None,
) -> Integer[Tensor, "batch out_len"]:
    """Start from ``start_id``; append the argmax of the last position until a
    row holds ``max_len`` ids (``start_id`` included). With ``end_id``: a row
    that appended it is padded with ``end_id`` from then on, and decoding stops
    early once every row has ended."""
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
    ended = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    while ys.shape[1] < max_len:
        hidden = model.decode(memory, src_mask, ys, causal_mask(ys.shape[1], ys.device).unsqueeze(0))
        nxt = model.generate(hidden[:, -1]).argmax(dim=-1)
        if end_id is not None:
            nxt = nxt.masked_fill(ended, end_id)
            ended = ended | (nxt == end_id)
        ys = torch.cat([ys, nxt.unsqueeze(-1)], dim=-1)
        if end_id is not None and bool(ended.all()):
            break
    return ys
