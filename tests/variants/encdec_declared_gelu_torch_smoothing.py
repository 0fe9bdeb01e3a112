"""VARIANT: an implementation that declares the other values of three
conventions and follows them: a GELU feed-forward (the tanh approximation,
as GPT-style notes write it), torch's label smoothing (``F.cross_entropy``
with ``label_smoothing``: ε / V on every class), and a −∞ fill (a fully
masked row gives NaN), with attention through
``F.scaled_dot_product_attention`` (allowed by the profile's list)."""

import torch.nn.functional as F

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import Adapter
from lmspec.reference.encdec.conventions import PAPER

VARIANT = {
    "what": "declared GELU (tanh), torch smoothing, NaN rows; F.scaled_dot_product_attention",
    "profile": "encdec",
}

_layers.gelu = lambda x: F.gelu(x, approximate="tanh")


def _attention(Q, K, V, mask=None, masked_row="nan"):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


_layers.attention = _attention

_A = Adapter(PAPER.with_(activation="gelu", label_smoothing="torch", masked_row="nan"))
get_conventions = _A.get_conventions
run_sinusoidal_positions = _A.run_sinusoidal_positions
run_source_mask = _A.run_source_mask
run_target_mask = _A.run_target_mask
run_multihead_attention = _A.run_multihead_attention
run_feed_forward = _A.run_feed_forward
run_layer_norm = _A.run_layer_norm
run_encoder_layer = _A.run_encoder_layer
run_decoder_layer = _A.run_decoder_layer
run_encoder_decoder = _A.run_encoder_decoder
run_greedy_decode = _A.run_greedy_decode
run_rate = _A.run_rate


def run_attention(Q, K, V, mask=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


def run_label_smoothing_loss(logits, target, smoothing, pad_id):
    vocab = logits.shape[-1]
    return F.cross_entropy(
        logits.reshape(-1, vocab), target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing
    )
