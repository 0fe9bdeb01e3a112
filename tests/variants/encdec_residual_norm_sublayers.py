"""VARIANT: a codebase whose sublayers include the residual and the norm, as
several widely forked implementations of the paper write them: its
attention and feed-forward modules end in ``layer_norm(residual + out)``, so
its layers are post-norm stacks of those modules and no module is the bare
sublayer. The adapter exposes one as docs/encdec.md says ("Sublayers that
include the residual and the norm"): the module's norm replaced by the
identity after loading, and its input subtracted. The rest is the reference
(the paper's conventions)."""

import torch
from torch import nn

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import *  # noqa: F403

VARIANT = {"what": "sublayers that include the residual and the norm (bare sublayer exposed)", "profile": "encdec"}


class MultiHeadAttention(_layers.MultiHeadAttention):
    """Attention that adds its query input and normalises: LN(query + attention)."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__(d_model, num_heads)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = _layers.LayerNorm(d_model)

    def forward(self, query, key, value, mask=None):
        residual = query
        out = super().forward(query, key, value, mask)
        return self.layer_norm(residual + self.dropout(out))


class PositionwiseFeedForward(_layers.FeedForward):
    """The FFN that adds its input and normalises: LN(x + FFN(x))."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = _layers.LayerNorm(d_model)

    def forward(self, x):
        return self.layer_norm(x + self.dropout(super().forward(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.slf_attn = MultiHeadAttention(d_model, num_heads)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_ff)

    def forward(self, x, mask):
        return self.pos_ffn(self.slf_attn(x, x, x, mask))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.slf_attn = MultiHeadAttention(d_model, num_heads)
        self.enc_attn = MultiHeadAttention(d_model, num_heads)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_ff)

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self.slf_attn(x, x, x, tgt_mask)
        return self.pos_ffn(self.enc_attn(x, memory, memory, src_mask))


# --- the adapter -------------------------------------------------------------------------------
#: profile key part -> this codebase's (per layer kind: norm2 closes the FFN in an encoder layer)
_ENCODER = {"self_attn": "slf_attn", "ffn": "pos_ffn", "norm1": "slf_attn.layer_norm", "norm2": "pos_ffn.layer_norm"}
_DECODER = {
    "self_attn": "slf_attn",
    "cross_attn": "enc_attn",
    "ffn": "pos_ffn",
    "norm1": "slf_attn.layer_norm",
    "norm2": "enc_attn.layer_norm",
    "norm3": "pos_ffn.layer_norm",
}


def _rename(key, table):
    return ".".join(table.get(part, part) for part in key.split("."))


def _load(module, weights, table=None):
    """The profile's weights into ``module`` under its own names; a parameter
    the profile does not give (a sublayer's own norm, which the caller
    replaces) keeps its init; an unknown key is an error."""
    state = module.state_dict()
    renamed = {_rename(k, table or {}): v for k, v in weights.items()}
    unknown = sorted(set(renamed) - set(state))
    if unknown:
        raise KeyError(f"{type(module).__name__} has no {unknown}")
    module.load_state_dict({**state, **renamed}, strict=True)
    return module.eval()


def run_multihead_attention(d_model, num_heads, weights, query, key, value, mask=None):
    mha = _load(MultiHeadAttention(d_model, num_heads, dropout=0.0), weights)
    mha.layer_norm = torch.nn.Identity()  # the module's own residual norm, not the sublayer's
    return mha(query, key, value, mask) - query  # its residual (it adds its query input)


def run_feed_forward(d_model, d_ff, weights, in_features):
    ffn = _load(PositionwiseFeedForward(d_model, d_ff, dropout=0.0), weights)
    ffn.layer_norm = torch.nn.Identity()
    return ffn(in_features) - in_features


def run_encoder_layer(d_model, num_heads, d_ff, weights, in_features, src_mask):
    return _load(EncoderLayer(d_model, num_heads, d_ff), weights, _ENCODER)(in_features, src_mask)


def run_decoder_layer(d_model, num_heads, d_ff, weights, in_features, memory, src_mask, tgt_mask):
    layer = _load(DecoderLayer(d_model, num_heads, d_ff), weights, _DECODER)
    return layer(in_features, memory, src_mask, tgt_mask)
