"""One small, valid call of every encdec adapter function, for the
from-scratch audit (test_audit.py): ``CALLS[name](fn, tmp_path, other)``."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec.conventions import Conventions, parse, without_attention_bias

Recipe = Callable[[Callable[..., Any], Path, Callable[[str], Any]], Any]
D, H, DFF = 8, 2, 16
SIZES = c.Sizes(11, 13, D, 1, H, DFF)


def _model_inputs():
    g = c.generator(0)
    src = c.tokens(g, [5, 3], 5, 11)
    tgt = c.tokens(g, [4, 4], 4, 13, start=True)
    return c.model_weights(g, SIZES, pre_norm=False), src, tgt


def _conventions(other) -> Conventions:
    """What the implementation declares (the paper's choices when it cannot tell)."""
    fn = other("get_conventions")
    try:
        return parse(fn() if fn is not None else None)
    except ValueError:
        return parse(None)


def _given(weights: dict, other) -> dict:
    return without_attention_bias(weights, _conventions(other))


def _model_weights_for(other) -> dict:
    conv = _conventions(other)
    g = c.generator(0)
    return without_attention_bias(c.model_weights(g, SIZES, pre_norm=conv.norm == "pre"), conv)


def _x(*shape):
    return c.randn(c.generator(sum(shape)), *shape)


CALLS: dict[str, Recipe] = {
    "get_conventions": lambda fn, tmp, other: fn(),
    "run_sinusoidal_positions": lambda fn, tmp, other: fn(max_len=6, d_model=D),
    "run_source_mask": lambda fn, tmp, other: fn(src=_model_inputs()[1], pad_id=c.PAD),
    "run_target_mask": lambda fn, tmp, other: fn(tgt=_model_inputs()[2], pad_id=c.PAD),
    "run_attention": lambda fn, tmp, other: fn(Q=_x(2, 3, D), K=_x(2, 5, D), V=_x(2, 5, D), mask=None),
    "run_multihead_attention": lambda fn, tmp, other: fn(
        d_model=D,
        num_heads=H,
        weights=_given(c.mha_weights(c.generator(1), D), other),
        query=_x(2, 3, D),
        key=_x(2, 5, D),
        value=_x(2, 5, D),
        mask=None,
    ),
    "run_feed_forward": lambda fn, tmp, other: fn(
        d_model=D, d_ff=DFF, weights=c.ffn_weights(c.generator(2), D, DFF), in_features=_x(2, 3, D)
    ),
    "run_layer_norm": lambda fn, tmp, other: fn(
        d_model=D, weights=c.norm_weights(c.generator(3), D), in_features=_x(2, 3, D)
    ),
    "run_encoder_layer": lambda fn, tmp, other: fn(
        d_model=D,
        num_heads=H,
        d_ff=DFF,
        weights=_given(c.encoder_layer_weights(c.generator(4), D, DFF), other),
        in_features=_x(2, 5, D),
        src_mask=None,
    ),
    "run_decoder_layer": lambda fn, tmp, other: fn(
        d_model=D,
        num_heads=H,
        d_ff=DFF,
        weights=_given(c.decoder_layer_weights(c.generator(5), D, DFF), other),
        in_features=_x(2, 3, D),
        memory=_x(2, 5, D),
        src_mask=None,
        tgt_mask=None,
    ),
    "run_encoder_decoder": lambda fn, tmp, other: fn(
        **SIZES.kwargs(),
        weights=_model_weights_for(other),
        src=_model_inputs()[1],
        tgt=_model_inputs()[2],
        src_mask=c.source_mask(_model_inputs()[1]),
        tgt_mask=c.target_mask(_model_inputs()[2]),
    ),
    "run_greedy_decode": lambda fn, tmp, other: fn(
        **SIZES.kwargs(),
        weights=_model_weights_for(other),
        src=_model_inputs()[1],
        src_mask=c.source_mask(_model_inputs()[1]),
        max_len=4,
        start_id=c.START,
        end_id=None,
    ),
    "run_rate": lambda fn, tmp, other: fn(step=10, d_model=D, factor=1.0, warmup=4),
    "run_label_smoothing_loss": lambda fn, tmp, other: fn(
        logits=_x(6, 13), target=_model_inputs()[2].reshape(-1)[:6], smoothing=0.1, pad_id=c.PAD
    ),
    "run_alibi_bias": lambda fn, tmp, other: fn(num_heads=H, seq_len=4),
    "run_local_attention_mask": lambda fn, tmp, other: fn(seq_len=4, window=2),
    "run_rotary_embedding": lambda fn, tmp, other: fn(
        d_k=4, theta=10000.0, max_seq_len=8, in_query_or_key=_x(2, 3, 4), token_positions=torch.arange(3)
    ),
    "run_encoder_layer_gradients": lambda fn, tmp, other: fn(
        d_model=D,
        num_heads=H,
        d_ff=DFF,
        weights=_given(c.encoder_layer_weights(c.generator(4), D, DFF), other),
        in_features=_x(2, 5, D),
        src_mask=None,
        grad_output=_x(2, 5, D),
        checkpoint=True,
    ),
}
