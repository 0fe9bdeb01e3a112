"""The encdec reference exposed through the profile's adapter functions
(SPEC §6.2), with the paper's conventions: post-norm, the biased LayerNorm,
ReLU, logits, uniform weights for a fully masked row, the annotated label
smoothing scored by cross-entropy. ``adapter_annotated`` is the same
reference with the annotated notes' conventions.

Each function builds the part on the device and dtype of its weights, loads
them strictly (``load_weights``: every wrong key or shape at once) and runs
it in eval mode (no dropout).
"""

import math

import torch
import torch.utils.checkpoint
from jaxtyping import Bool, Float, Integer
from torch import Tensor, nn

from lmspec.reference.encdec.conventions import PAPER, Conventions
from lmspec.reference.encdec.layers import (
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    attention,
    causal_mask,
    sinusoidal_positions,
    source_mask,
    target_mask,
)
from lmspec.reference.encdec.model import DecoderLayer, EncoderDecoder, EncoderLayer, greedy_decode
from lmspec.reference.encdec.training import label_smoothing_loss, rate
from lmspec.reference.nn.loading import load_weights
from lmspec.reference.nn.rope import RotaryPositionalEmbedding

FUNCTIONS = (
    "get_conventions",
    "run_sinusoidal_positions",
    "run_source_mask",
    "run_target_mask",
    "run_attention",
    "run_multihead_attention",
    "run_feed_forward",
    "run_layer_norm",
    "run_encoder_layer",
    "run_decoder_layer",
    "run_encoder_decoder",
    "run_greedy_decode",
    "run_rate",
    "run_label_smoothing_loss",
    "run_alibi_bias",
    "run_local_attention_mask",
    "run_rotary_embedding",
    "run_encoder_layer_gradients",
)


def _loaded(module: nn.Module, weights: dict[str, Tensor]) -> nn.Module:
    first = next(iter(weights.values()))
    load_weights(module.to(device=first.device, dtype=first.dtype), weights)
    return module.eval()


class Adapter:
    """The adapter functions for one set of conventions (bound methods)."""

    def __init__(self, conventions: Conventions) -> None:
        self.conventions = conventions

    def get_conventions(self) -> dict[str, str | bool]:
        return self.conventions.as_dict()

    def run_sinusoidal_positions(self, max_len: int, d_model: int) -> Float[Tensor, "max_len d_model"]:
        return sinusoidal_positions(max_len, d_model)

    def run_source_mask(self, src: Integer[Tensor, "batch src_len"], pad_id: int) -> Bool[Tensor, "batch 1 src_len"]:
        return source_mask(src, pad_id)

    def run_target_mask(
        self, tgt: Integer[Tensor, "batch tgt_len"], pad_id: int
    ) -> Bool[Tensor, "batch tgt_len tgt_len"]:
        return target_mask(tgt, pad_id)

    def run_attention(
        self,
        Q: Float[Tensor, "... n d_k"],
        K: Float[Tensor, "... m d_k"],
        V: Float[Tensor, "... m d_v"],
        mask: Bool[Tensor, "..."] | None = None,
    ) -> Float[Tensor, "... n d_v"]:
        return attention(Q, K, V, mask, self.conventions.masked_row)

    def run_multihead_attention(
        self,
        d_model: int,
        num_heads: int,
        weights: dict[str, Tensor],
        query: Float[Tensor, "... n d_model"],
        key: Float[Tensor, "... m d_model"],
        value: Float[Tensor, "... m d_model"],
        mask: Bool[Tensor, "..."] | None = None,
    ) -> Float[Tensor, "... n d_model"]:
        c = self.conventions
        mha = _loaded(MultiHeadAttention(d_model, num_heads, c.masked_row, bias=c.attention_bias), weights)
        return mha(query, key, value, mask)

    def run_feed_forward(
        self, d_model: int, d_ff: int, weights: dict[str, Tensor], in_features: Float[Tensor, "... d_model"]
    ) -> Float[Tensor, "... d_model"]:
        return _loaded(FeedForward(d_model, d_ff, self.conventions.activation), weights)(in_features)

    def run_layer_norm(
        self, d_model: int, weights: dict[str, Tensor], in_features: Float[Tensor, "... d_model"]
    ) -> Float[Tensor, "... d_model"]:
        return _loaded(LayerNorm(d_model, self.conventions.layer_norm), weights)(in_features)

    def run_encoder_layer(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        weights: dict[str, Tensor],
        in_features: Float[Tensor, "... src_len d_model"],
        src_mask: Bool[Tensor, "..."] | None,
    ) -> Float[Tensor, "... src_len d_model"]:
        layer = _loaded(EncoderLayer(d_model, num_heads, d_ff, self.conventions), weights)
        return layer(in_features, src_mask)

    def run_decoder_layer(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        weights: dict[str, Tensor],
        in_features: Float[Tensor, "... tgt_len d_model"],
        memory: Float[Tensor, "... src_len d_model"],
        src_mask: Bool[Tensor, "..."] | None,
        tgt_mask: Bool[Tensor, "..."] | None,
    ) -> Float[Tensor, "... tgt_len d_model"]:
        layer = _loaded(DecoderLayer(d_model, num_heads, d_ff, self.conventions), weights)
        return layer(in_features, memory, src_mask, tgt_mask)

    def _model(self, sizes: tuple[int, int, int, int, int, int], weights: dict[str, Tensor]) -> EncoderDecoder:
        return _loaded(EncoderDecoder(*sizes, conventions=self.conventions), weights)  # type: ignore[return-value]

    def run_encoder_decoder(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        weights: dict[str, Tensor],
        src: Integer[Tensor, "batch src_len"],
        tgt: Integer[Tensor, "batch tgt_len"],
        src_mask: Bool[Tensor, "..."] | None,
        tgt_mask: Bool[Tensor, "..."] | None,
    ) -> Float[Tensor, "batch tgt_len tgt_vocab"]:
        sizes = (src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff)
        return self._model(sizes, weights)(src, tgt, src_mask, tgt_mask)

    def run_greedy_decode(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        weights: dict[str, Tensor],
        src: Integer[Tensor, "batch src_len"],
        src_mask: Bool[Tensor, "..."] | None,
        max_len: int,
        start_id: int,
        end_id: int | None = None,
    ) -> Integer[Tensor, "batch out_len"]:
        sizes = (src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff)
        return greedy_decode(self._model(sizes, weights), src, src_mask, max_len, start_id, end_id)

    def run_rate(self, step: int, d_model: int, factor: float | int, warmup: int) -> float:
        return rate(step, d_model, factor, warmup)

    def run_label_smoothing_loss(
        self, logits: Float[Tensor, "... vocab"], target: Integer[Tensor, "..."], smoothing: float, pad_id: int
    ) -> Float[Tensor, ""]:
        return label_smoothing_loss(logits, target, smoothing, pad_id, self.conventions)

    # --- extended ------------------------------------------------------------------------------
    def run_alibi_bias(self, num_heads: int, seq_len: int) -> Float[Tensor, "num_heads seq_len seq_len"]:
        """``−m_h (i − j)`` for keys j ≤ i, −∞ above the diagonal; slopes
        ``m_h = 2^(−8k/h)``, k = 1..h."""
        slopes = torch.tensor([2.0 ** (-8.0 * k / num_heads) for k in range(1, num_heads + 1)], dtype=torch.float64)
        pos = torch.arange(seq_len, dtype=torch.float64)
        distance = pos.unsqueeze(-1) - pos  # i − j
        bias = -slopes.view(-1, 1, 1) * distance
        bias = bias.masked_fill(~causal_mask(seq_len), -math.inf)
        return bias.to(torch.float32)

    def run_local_attention_mask(self, seq_len: int, window: int) -> Bool[Tensor, "seq_len seq_len"]:
        """Query i sees key j when ``i − window < j ≤ i``."""
        pos = torch.arange(seq_len)
        distance = pos.unsqueeze(-1) - pos
        return (distance >= 0) & (distance < window)

    def run_rotary_embedding(
        self,
        d_k: int,
        theta: float,
        max_seq_len: int,
        in_query_or_key: Float[Tensor, "... seq d_k"],
        token_positions: Integer[Tensor, "... seq"],
    ) -> Float[Tensor, "... seq d_k"]:
        """§2's RoPE (adjacent pairs ``(x_{2k}, x_{2k+1})``), the rotation Q and K take."""
        rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len, device=in_query_or_key.device)
        return rope(in_query_or_key, token_positions)

    def run_encoder_layer_gradients(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        weights: dict[str, Tensor],
        in_features: Float[Tensor, "... src_len d_model"],
        src_mask: Bool[Tensor, "..."] | None,
        grad_output: Float[Tensor, "... src_len d_model"],
        checkpoint: bool,
    ) -> tuple[Float[Tensor, "... src_len d_model"], dict[str, Tensor]]:
        """The encoder layer's output and the gradients of ``(output · grad_output).sum()``
        w.r.t. ``in_features`` (key ``"in_features"``) and every weight (its own key);
        ``checkpoint=True`` runs the layer under ``torch.utils.checkpoint`` (activations
        recomputed in the backward pass), which must change nothing."""
        layer = _loaded(EncoderLayer(d_model, num_heads, d_ff, self.conventions), weights)
        x = in_features.detach().clone().requires_grad_(True)
        if checkpoint:
            out = torch.utils.checkpoint.checkpoint(layer, x, src_mask, use_reentrant=False)
        else:
            out = layer(x, src_mask)
        out.backward(grad_output)
        params = dict(layer.named_parameters())
        grads = {name: params[name].grad for name in weights}
        grads["in_features"] = x.grad
        return out.detach(), grads


def bind(conventions: Conventions) -> dict[str, object]:
    """The adapter functions, as a namespace for ``globals().update`` or a test."""
    adapter = Adapter(conventions)
    return {name: getattr(adapter, name) for name in FUNCTIONS}


_PAPER = Adapter(PAPER)
get_conventions = _PAPER.get_conventions
run_sinusoidal_positions = _PAPER.run_sinusoidal_positions
run_source_mask = _PAPER.run_source_mask
run_target_mask = _PAPER.run_target_mask
run_attention = _PAPER.run_attention
run_multihead_attention = _PAPER.run_multihead_attention
run_feed_forward = _PAPER.run_feed_forward
run_layer_norm = _PAPER.run_layer_norm
run_encoder_layer = _PAPER.run_encoder_layer
run_decoder_layer = _PAPER.run_decoder_layer
run_encoder_decoder = _PAPER.run_encoder_decoder
run_greedy_decode = _PAPER.run_greedy_decode
run_rate = _PAPER.run_rate
run_label_smoothing_loss = _PAPER.run_label_smoothing_loss
run_alibi_bias = _PAPER.run_alibi_bias
run_local_attention_mask = _PAPER.run_local_attention_mask
run_rotary_embedding = _PAPER.run_rotary_embedding
run_encoder_layer_gradients = _PAPER.run_encoder_layer_gradients

__all__ = list(FUNCTIONS)
