"""SPEC §6.2 encoder and decoder layers (residual blocks).

Oracle: torch.nn.TransformerEncoderLayer / TransformerDecoderLayer in
float64 (batch_first, dropout 0) with the implementation's weights mapped in,
``norm_first`` and the activation as declared, the annotated LayerNorm put in
place of torch's when declared. A deviation that matches another convention
is named with the declaration that would make it right. Properties: the
decoder layer is causal under the target mask; cross-attention reads the
encoder output (m ≠ n).
"""

import pytest
import torch

from lmspec.conformance import hints, near
from lmspec.conformance.asserts import assert_close, assert_shape
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import (  # noqa: F401  (fixture)
    conventions,
    expected,
    without_attention_bias,
)
from lmspec.conformance.encdec.known_bugs import KNOWN_BUGS
from lmspec.conformance.encdec.parts import swaps
from lmspec.conformance.hints import other

SEEDS = [0, 1, 2]
KEYS = ("norm", "layer_norm", "activation")
SHAPES = [(16, 4, 32), (12, 2, 24)]


def _encoder_case(seed: int, d: int, h: int, d_ff: int):
    g = c.generator(400 + seed)
    w = c.encoder_layer_weights(g, d, d_ff)
    x = c.randn(g, 2, 7, d)
    mask = c.source_mask(c.tokens(g, [7, 5], 7, 11))
    return d, h, d_ff, w, x, mask


def _given(case, conv):
    """``case`` (d_model, heads, d_ff, weights, ...) with the weights the
    implementation is given (no attention biases when it declares none)."""
    d, h, d_ff, w, *rest = case
    return (d, h, d_ff, without_attention_bias(w, conv), *rest)


def _observed_encoder(run_encoder_layer, case, conv, impl=None):
    """The implementation's encoder layer on ``case`` (d_model, heads, d_ff,
    weights, x, src_mask), the known bugs' replays there and the oracle's
    layer with each of the implementation's parts swapped in (``impl``)."""
    case = _given(case, conv)
    d, h, d_ff, *inputs = case
    names = ("weights", "in_features", "src_mask")
    out = run_encoder_layer(d_model=d, num_heads=h, d_ff=d_ff, **dict(zip(names, c.fresh(*inputs))))
    bugs = KNOWN_BUGS.thunks("encdec.encoder_layer", *case, conv)
    return out, bugs + _part_hints(impl, "encdec.encoder_layer", o.encoder_layer, o.encoder_layer_formula, case, conv)


def _part_hints(impl, item: str, oracle, formula, case, conv):
    """hints.part_hints for the layer ``item``: the written-out ``formula``
    with one of the implementation's parts in, against ``oracle``."""
    if impl is None:
        return []
    return hints.part_hints(
        swaps(impl, item, lambda **kw: formula(*case, conv, **kw)), lambda: oracle(*case, conv), c.TOL_LAYER
    )


# Second inputs: other widths (d_model 24 over 3 heads, then 8 over 2), padding in one row.
SECOND_ENCODER = (_encoder_case(7, 24, 3, 48), _encoder_case(8, 8, 2, 32))


@pytest.mark.spec("encdec.encoder_layer")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("d", "h", "d_ff"), SHAPES)
def test_encoder_layer(run_encoder_layer, impl, conventions, seed, d, h, d_ff):  # noqa: F811
    """Self-attention under the source mask, then the FFN, each in a residual
    block (post-norm LN(x + sublayer(x)), or pre-norm x + sublayer(LN(x)) when declared)."""
    case = _given(_encoder_case(seed, d, h, d_ff), conventions)
    x, mask = case[-2:]
    out, bugs = _observed_encoder(run_encoder_layer, case, conventions, impl)
    assert_shape(out, (2, 7, d), rule="encoder layer output is (batch, src_len, d_model)")
    assert_close(
        out,
        expected(conventions, lambda conv: o.encoder_layer(*case, conv), out, c.TOL_LAYER),
        c.TOL_LAYER,
        rule=f"encoder layer vs torch.nn.TransformerEncoderLayer (float64; declared {conventions.declared(*KEYS)})",
        hints=bugs,
        near=(near.scale, near.positions(-2)),
        again=lambda: _observed_encoder(run_encoder_layer, other(case, *SECOND_ENCODER), conventions, impl),
        context=f"d_model={d}, heads={h}, d_ff={d_ff}, x{tuple(x.shape)}, src_mask {mask.int().tolist()}",
    )


def _decoder_case(seed: int, d: int, d_ff: int, n: int = 5, m: int = 7):
    g = c.generator(500 + seed)
    w = c.decoder_layer_weights(g, d, d_ff)
    x, memory = c.randn(g, 2, n, d), c.randn(g, 2, m, d)
    src_mask = c.source_mask(c.tokens(g, [m, m - 2], m, 11))
    tgt_mask = c.target_mask(c.tokens(g, [n, n - 1], n, 11, start=True))
    return w, x, memory, src_mask, tgt_mask


def _call_decoder(run_decoder_layer, d, h, d_ff, w, x, memory, src_mask, tgt_mask):
    names = ("weights", "in_features", "memory", "src_mask", "tgt_mask")
    return run_decoder_layer(
        d_model=d, num_heads=h, d_ff=d_ff, **dict(zip(names, c.fresh(w, x, memory, src_mask, tgt_mask)))
    )


def _observed_decoder(run_decoder_layer, case, conv, impl=None):
    """The implementation's decoder layer on ``case`` (d_model, heads, d_ff,
    weights, x, memory, src_mask, tgt_mask), the known bugs' replays there and
    the oracle's layer with each of the implementation's parts swapped in."""
    case = _given(case, conv)
    bugs = KNOWN_BUGS.thunks("encdec.decoder_layer", *case, conv)
    parts = _part_hints(impl, "encdec.decoder_layer", o.decoder_layer, o.decoder_layer_formula, case, conv)
    return _call_decoder(run_decoder_layer, *case), bugs + parts


# Second inputs: other widths and lengths (n = 6 over m = 4, then n = 4 over m = 8).
SECOND_DECODER = (
    (24, 3, 48, *_decoder_case(7, 24, 48, n=6, m=4)),
    (8, 2, 32, *_decoder_case(8, 8, 32, n=4, m=8)),
)


@pytest.mark.spec("encdec.decoder_layer")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("d", "h", "d_ff"), SHAPES)
def test_decoder_layer(run_decoder_layer, impl, conventions, seed, d, h, d_ff):  # noqa: F811
    """Masked self-attention, cross-attention over the encoder output (m = 7 ≠ n = 5), FFN."""
    case = _given((d, h, d_ff, *_decoder_case(seed, d, d_ff)), conventions)
    x, memory = case[4], case[5]
    out, bugs = _observed_decoder(run_decoder_layer, case, conventions, impl)
    assert_shape(out, (2, 5, d), rule="decoder layer output is (batch, tgt_len, d_model)")
    assert_close(
        out,
        expected(conventions, lambda conv: o.decoder_layer(*case, conv), out, c.TOL_LAYER),
        c.TOL_LAYER,
        rule=f"decoder layer vs torch.nn.TransformerDecoderLayer (float64; declared {conventions.declared(*KEYS)})",
        hints=bugs,
        near=(near.scale, near.positions(-2)),
        again=lambda: _observed_decoder(run_decoder_layer, other(case, *SECOND_DECODER), conventions, impl),
        context=f"d_model={d}, heads={h}, d_ff={d_ff}, x{tuple(x.shape)}, memory{tuple(memory.shape)}",
    )


@pytest.mark.spec("encdec.decoder_layer")
@pytest.mark.parametrize("seed", SEEDS)
def test_decoder_layer_is_causal(run_decoder_layer, conventions, seed):  # noqa: F811
    """Under a causal target mask, changing target positions > i leaves position i unchanged."""
    w, x, memory, src_mask, _ = _decoder_case(seed, 16, 32)
    w = without_attention_bias(w, conventions)
    causal = o.causal(5).expand(2, 5, 5)
    base = torch.as_tensor(_call_decoder(run_decoder_layer, 16, 4, 32, w, x, memory, src_mask, causal)).detach()
    changed = x.clone()
    changed[:, 3:] = c.randn(c.generator(seed + 50), 2, 2, 16)
    out = torch.as_tensor(_call_decoder(run_decoder_layer, 16, 4, 32, w, changed, memory, src_mask, causal)).detach()
    assert_close(
        out[:, :3], base[:, :3], c.TOL_LAYER, rule="decoder position i does not depend on target positions > i"
    )


@pytest.mark.spec("encdec.decoder_layer")
@pytest.mark.parametrize("seed", SEEDS)
def test_decoder_layer_reads_the_memory(run_decoder_layer, conventions, seed):  # noqa: F811
    """Cross-attention keys and values come from the encoder output: padded
    memory positions do not matter, the others do."""
    w, x, memory, src_mask, tgt_mask = _decoder_case(seed, 16, 32)
    w = without_attention_bias(w, conventions)
    base = torch.as_tensor(_call_decoder(run_decoder_layer, 16, 4, 32, w, x, memory, src_mask, tgt_mask)).detach()
    padded = memory.clone()
    padded[1, 5:] = c.randn(c.generator(seed + 60), 2, 16) * 3.0  # row 1 has m − 2 real positions
    out = torch.as_tensor(_call_decoder(run_decoder_layer, 16, 4, 32, w, x, padded, src_mask, tgt_mask)).detach()
    assert_close(out, base, c.TOL_LAYER, rule="masked (padding) memory positions do not change the decoder output")
    real = memory.clone()
    real[:, 0] += 3.0
    out = torch.as_tensor(_call_decoder(run_decoder_layer, 16, 4, 32, w, x, real, src_mask, tgt_mask)).detach()
    assert float((out - base).abs().max()) > 1e-3, (
        "the decoder layer's output does not depend on the encoder output (memory): cross-attention must take "
        "its keys and values from memory, not from the decoder"
    )
