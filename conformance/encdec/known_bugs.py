"""The known bugs of the encdec profile's items (SPEC §6.2), replayed on the
float64 oracles of ``oracles.py``: one registry, ``KNOWN_BUGS``, read by every
test module of conformance/encdec.

A replay takes the inputs the item's oracle takes (and the declared
``Conventions`` last, where the oracle depends on them) and returns what the
bug gives; a test names its cause only when the replay reproduces the
implementation's output on the failing input and on the test's second input
(conformance/hints.py). An item is its spec id; ``id/part`` where one item
has several functions or observations (the source and the target masks, a
fully masked attention row).

An undeclared convention is a known bug of every item it changes: the replay
of ``key=value`` runs the oracle under that value, and raises where that
value is the declared one (a replay that cannot be computed names nothing).
"""

import math
from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from lmspec.conformance.cs336.oracles import nn_bugs
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import VALUES, Conventions, undeclared
from lmspec.conformance.hints import KnownBugs

KNOWN_BUGS = KnownBugs()
F64 = torch.float64


class Declared(ValueError):
    """The replayed convention is the declared one: no deviation to name."""


def _undeclared(item: str, keys: Iterable[str], oracle: Callable[..., Tensor]) -> None:
    """Register ``undeclared(key, value)`` for every value of ``keys``: the
    replay is ``oracle(*inputs, conv)`` under that value."""
    for key in keys:
        for value in VALUES[key]:

            def replay(*args, key=key, value=value):
                *inputs, conv = args
                if getattr(conv, key) == value:
                    raise Declared(f"{key}={value!r} is declared")
                return oracle(*inputs, conv.with_(**{key: value}))

            KNOWN_BUGS.add(item, undeclared(key, value), replay)


# --- masks: (ids, pad_id) -> the mask the bug builds ------------------------------------------------
KNOWN_BUGS.add(
    "encdec.masks/source",
    "polarity inverted (True on padding)",
    lambda src, pad_id: (src == pad_id).unsqueeze(-2),
)


def _target(diagonal: int = 0, *, keys: bool = True, queries: bool = False, causal: bool = True):
    def replay(tgt: Tensor, pad_id: int) -> Tensor:
        n = tgt.shape[-1]
        mask = torch.ones(tgt.shape[0], n, n, dtype=torch.bool)
        if causal:
            mask = mask & torch.ones(n, n, dtype=torch.bool).tril(diagonal)
        if keys:
            mask = mask & (tgt != pad_id).unsqueeze(-2)
        if queries:
            mask = mask & (tgt != pad_id).unsqueeze(-1)
        return mask

    return replay


KNOWN_BUGS.add("encdec.masks/target", "causal mask excludes the diagonal (j < i instead of j ≤ i)", _target(-1))
KNOWN_BUGS.add("encdec.masks/target", "causal mask off by one (j ≤ i + 1)", _target(1))
KNOWN_BUGS.add(
    "encdec.masks/target", "padding on the query axis instead of the key axis", _target(keys=False, queries=True)
)
KNOWN_BUGS.add(
    "encdec.masks/target", "polarity inverted (True must mean 'may attend')", lambda tgt, pad: ~_target()(tgt, pad)
)
KNOWN_BUGS.add("encdec.masks/target", "padding ignored (causal only)", _target(keys=False))
KNOWN_BUGS.add("encdec.masks/target", "not causal (padding only)", _target(causal=False))


# --- attention: (Q, K, V, mask) ------------------------------------------------------------------------
def _inverted(mask: Tensor | None) -> Tensor:
    if mask is None:
        raise ValueError("no mask to invert")
    return ~mask


# an inverted mask leaves rows with no key: a large negative fill makes them uniform
KNOWN_BUGS.add(
    "encdec.attention",
    "mask polarity inverted (True must mean 'may attend')",
    lambda q, k, v, mask: o.attention(q, k, v, _inverted(mask), fill=o.UNIFORM_FILL),
)
KNOWN_BUGS.add(
    "encdec.attention", "missing 1/sqrt(d_k) scaling", lambda q, k, v, mask: o.attention(q, k, v, mask, scale=1.0)
)
KNOWN_BUGS.add(
    "encdec.attention",
    "scaled by 1/d_k instead of 1/sqrt(d_k)",
    lambda q, k, v, mask: o.attention(q, k, v, mask, scale=1.0 / q.shape[-1]),
)
KNOWN_BUGS.add("encdec.attention", "mask ignored", lambda q, k, v, mask: o.attention(q, k, v))
KNOWN_BUGS.add(
    "encdec.attention",
    "masked scores set to 0 instead of a large negative value",
    lambda q, k, v, mask: o.attention(q, k, v, mask, fill=0.0),
)
# a row whose keys are all masked: what a −∞ fill gives it
KNOWN_BUGS.add(
    "encdec.attention/masked_row",
    "NaN for a fully masked row: declare masked_row='nan'",
    lambda q, k, v, mask: o.attention(q, k, v, mask),
)


# --- multi-head attention: (d_model, heads, weights, query, key, value, mask) ----------------------
def _queries_scaled(w: dict[str, Tensor], factor: float) -> dict[str, Tensor]:
    """Weights whose query projection is ``factor`` times larger: scores × ``factor``."""
    return {k: t * factor if k.startswith("q_proj.") else t for k, t in w.items()}


def _heads_interleaved(w: dict[str, Tensor], d_model: int, heads: int) -> dict[str, Tensor]:
    """Weights whose contiguous head h holds the columns h, h + heads, ... of Q, K and V."""
    order = torch.arange(d_model).view(-1, heads).T.reshape(-1)
    return {k: t[order] if k[0] in "qkv" else t for k, t in w.items()}


_MHA = "encdec.mha"
KNOWN_BUGS.add(
    _MHA,
    "biases ignored (a model without attention biases, as the paper's, declares attention_bias=False)",
    lambda d, h, w, q, k, v, mask: o.mha(
        d, h, {n: torch.zeros_like(t) if n.endswith("bias") else t for n, t in w.items()}, q, k, v, mask
    ),
)


def _fits(mask: Tensor | None, n: int) -> Tensor | None:
    """``mask`` where it fits n keys (a self-attention mask), else none: a
    (batch, 1, m) source mask does not broadcast over the query's own keys."""
    return mask if mask is not None and mask.shape[-1] == n else None


KNOWN_BUGS.add(
    _MHA,
    "keys and values from the query input",
    lambda d, h, w, q, k, v, mask: o.mha(d, h, w, q, q, q, _fits(mask, q.shape[1])),
)
KNOWN_BUGS.add(_MHA, "values taken from the key input", lambda d, h, w, q, k, v, mask: o.mha(d, h, w, q, k, k, mask))
KNOWN_BUGS.add(
    _MHA,
    "mask polarity inverted",
    lambda d, h, w, q, k, v, mask: o.mha(d, h, w, q, k, v, _inverted(mask), uniform=True),
)
KNOWN_BUGS.add(_MHA, "mask ignored", lambda d, h, w, q, k, v, mask: o.mha(d, h, w, q, k, v))
KNOWN_BUGS.add(
    _MHA,
    "missing 1/sqrt(d_k) scaling",
    lambda d, h, w, q, k, v, mask: o.mha(d, h, _queries_scaled(w, math.sqrt(d / h)), q, k, v, mask),
)
KNOWN_BUGS.add(
    _MHA,
    "scores scaled by 1/d_k instead of 1/sqrt(d_k)",
    lambda d, h, w, q, k, v, mask: o.mha(d, h, _queries_scaled(w, (d / h) ** -0.5), q, k, v, mask),
)
KNOWN_BUGS.add(
    _MHA,
    "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_k)",
    lambda d, h, w, q, k, v, mask: o.mha(d, h, _queries_scaled(w, h**-0.5), q, k, v, mask),
)
KNOWN_BUGS.add(
    _MHA,
    "heads taken as interleaved columns instead of contiguous blocks",
    lambda d, h, w, q, k, v, mask: o.mha(d, h, _heads_interleaved(w, d, h), q, k, v, mask),
)


# --- FFN: (weights, x, conv) ----------------------------------------------------------------------------
def _relu_at(where: str):
    """fc2(fc1(x)) with the ReLU on the ``"input"``, on the ``"output"``, or nowhere."""

    def replay(w, x, conv):
        f = {k: o.f64(t) for k, t in w.items()}
        h = o.f64(x)
        h = torch.relu(h) if where == "input" else h
        h = (h @ f["fc1.weight"].T + f["fc1.bias"]) @ f["fc2.weight"].T + f["fc2.bias"]
        return torch.relu(h) if where == "output" else h

    return replay


KNOWN_BUGS.add("encdec.ffn", "ReLU after fc2 instead of between fc1 and fc2", _relu_at("output"))
KNOWN_BUGS.add("encdec.ffn", "ReLU before fc1 instead of between fc1 and fc2", _relu_at("input"))
KNOWN_BUGS.add("encdec.ffn", "no activation between fc1 and fc2", _relu_at("nowhere"))
KNOWN_BUGS.add(
    "encdec.ffn",
    "biases ignored",
    lambda w, x, conv: o.feed_forward({k: t * 0 if k.endswith("bias") else t for k, t in w.items()}, x),
)
_undeclared("encdec.ffn", ["activation"], lambda w, x, conv: o.feed_forward(w, x, conv.activation))


# --- LayerNorm: (x, weight, bias, conv) ---------------------------------------------------------------
_undeclared("encdec.layernorm", ["layer_norm"], lambda x, g, b, conv: o.layer_norm(x, g, b, conv.layer_norm))
KNOWN_BUGS.add(
    "encdec.layernorm",
    "gain and bias ignored",
    lambda x, g, b, conv: o.layer_norm(x, torch.ones_like(g), torch.zeros_like(b), conv.layer_norm),
)


@KNOWN_BUGS.register(
    "encdec.layernorm", "unbiased variance inside the root (torch.var's default): the paper's norm uses the biased one"
)
def _torch_var(x, g, b, conv):
    x = o.f64(x)
    eps = 1e-5 if conv.layer_norm == "biased" else 1e-6
    return o.f64(g) * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + o.f64(b)


# --- positions: (max_len, d_model) ------------------------------------------------------------------
KNOWN_BUGS.add(
    "encdec.positions", "sin and cos swapped (cos on even columns)", lambda n, d: o.positions(n, d, swap=True)
)
KNOWN_BUGS.add(
    "encdec.positions", "not interleaved (all sines, then all cosines)", lambda n, d: o.positions(n, d, halves=True)
)


@KNOWN_BUGS.register("encdec.positions", "frequency exponent i/d instead of 2i/d (i the pair index)")
def _pair_exponent(max_len, d_model):
    angle = torch.arange(max_len, dtype=F64)[:, None] / 10000.0 ** (torch.arange(d_model // 2, dtype=F64) / d_model)
    return torch.stack([angle.sin(), angle.cos()], -1).flatten(-2)


# --- the layers ------------------------------------------------------------------------------------------
_LAYER_KEYS = ("norm", "layer_norm", "activation")
# (d_model, heads, d_ff, weights, x, src_mask, conv)
_undeclared("encdec.encoder_layer", _LAYER_KEYS, o.encoder_layer)
KNOWN_BUGS.add(
    "encdec.encoder_layer",
    "source mask ignored",
    lambda d, h, ff, w, x, mask, conv: o.encoder_layer(d, h, ff, w, x, None, conv),
)
# (d_model, heads, d_ff, weights, x, memory, src_mask, tgt_mask, conv)
_undeclared("encdec.decoder_layer", _LAYER_KEYS, o.decoder_layer)
KNOWN_BUGS.add(
    "encdec.decoder_layer",
    "target mask ignored (not causal)",
    lambda d, h, ff, w, x, mem, src, tgt, conv: o.decoder_layer(d, h, ff, w, x, mem, src, None, conv),
)
KNOWN_BUGS.add(
    "encdec.decoder_layer",
    "source mask ignored in cross-attention",
    lambda d, h, ff, w, x, mem, src, tgt, conv: o.decoder_layer(d, h, ff, w, x, mem, None, tgt, conv),
)


# each term of a residual block (where the input is added; the norms' weights) and
# what cross-attention reads, on the layers written out (oracles.*_layer_formula)
def _layer_replays(item: str, formula: Callable[..., Tensor], norms: tuple[str, ...]) -> None:
    def add(cause: str, **replay) -> None:
        KNOWN_BUGS.add(item, cause, lambda *args: formula(*args, **replay))

    add("residual around the norm: x + LN(sublayer(x))", residual="norm")
    add("residual left out: the sublayer's output alone, normalised", residual="none")
    where = {
        "norm1": "self-attention",
        "norm2": "cross-attention" if len(norms) == 3 else "the FFN",
        "norm3": "the FFN",
    }
    for i, a in enumerate(norms):
        for b in norms[i + 1 :]:
            add(
                f"{a} and {b} used in each other's place ({a} belongs to {where[a]}, {b} to {where[b]})",
                norms={a: b, b: a},
            )


_layer_replays("encdec.encoder_layer", o.encoder_layer_formula, ("norm1", "norm2"))
_layer_replays("encdec.decoder_layer", o.decoder_layer_formula, ("norm1", "norm2", "norm3"))
KNOWN_BUGS.add(
    "encdec.decoder_layer",
    "cross-attention's keys and values from the layer's input x instead of the encoder output (memory)",
    lambda *args: o.decoder_layer_formula(*args, memory_from="input"),
)
KNOWN_BUGS.add(
    "encdec.decoder_layer",
    "cross-attention's keys and values from the decoder's own state (self-attention again) instead of the "
    "encoder output (memory)",
    lambda *args: o.decoder_layer_formula(*args, memory_from="hidden"),
)


# --- the model: (sizes, weights, src, tgt, src_mask, tgt_mask, conv) -------------------------------------
# not the norm placement: the other one needs final norms the weights have only under pre-norm
_undeclared("encdec.model", ("layer_norm", "activation", "output"), o.model)
KNOWN_BUGS.add(
    "encdec.model",
    "embeddings not multiplied by sqrt(d_model)",
    lambda s, w, src, tgt, sm, tm, conv: o.model(s, w, src, tgt, sm, tm, conv, scale=False),
)
KNOWN_BUGS.add(
    "encdec.model",
    "positions added before the sqrt(d_model) scaling",
    lambda s, w, src, tgt, sm, tm, conv: o.model(s, w, src, tgt, sm, tm, conv, positions_first=True),
)
KNOWN_BUGS.add(
    "encdec.model",
    "source mask ignored in the encoder (used in cross-attention only)",
    lambda *args: o.model(*args, encoder_mask=False),
)
KNOWN_BUGS.add(
    "encdec.model",
    "source mask ignored in cross-attention (used in the encoder only)",
    lambda *args: o.model(*args, cross_mask=False),
)
KNOWN_BUGS.add(
    "encdec.model",
    "target mask ignored in the decoder (not causal)",
    lambda s, w, src, tgt, sm, tm, conv: o.model(s, w, src, tgt, sm, None, conv),
)
KNOWN_BUGS.add(
    "encdec.model",
    "target ids embedded with the source table (src_embed) instead of tgt_embed",
    lambda *args: o.model(*args, target_table="src_embed.weight"),
)
# greedy: (sizes, weights, src, src_mask, max_len, start_id, end_id, conv)
KNOWN_BUGS.add(
    "encdec.greedy",
    "a row that ended keeps decoding instead of being padded with end_id",
    lambda *args: o.greedy(*args, stop_late=True),
)
KNOWN_BUGS.add(
    "encdec.greedy",
    "next id the argmax at the first position instead of the last",
    lambda *args: o.greedy(*args, position=0),
)
KNOWN_BUGS.add(
    "encdec.greedy",
    "max_len counted without start_id: max_len new ids, one too many",
    lambda *args: o.greedy(*args, extra=1),
)
KNOWN_BUGS.add(
    "encdec.greedy",
    "one id too few: max_len − 1 ids, start_id included",
    lambda *args: o.greedy(*args, extra=-1),
)
KNOWN_BUGS.add(
    "encdec.greedy",
    "stops when every row has predicted end_id without appending it",
    lambda *args: o.greedy(*args, append_end=False),
)


# --- training: the rate (step, d_model, factor, warmup), label smoothing ----------------------------------
KNOWN_BUGS.add(
    "encdec.rate",
    "step 0 not treated as 1",
    lambda step, d, factor, warmup: 0.0 if step == 0 else o.rate(step, d, factor, warmup),
)
KNOWN_BUGS.add(
    "encdec.rate",
    "warmup exponent -0.5 instead of -1.5",
    lambda step, d, factor, warmup: factor * d**-0.5 * min(max(step, 1) ** -0.5, max(step, 1) * warmup**-0.5),
)
KNOWN_BUGS.add(
    "encdec.rate",
    "d_model^-0.5 missing",
    lambda step, d, factor, warmup: o.rate(step, d, factor, warmup) * d**0.5,
)
KNOWN_BUGS.add(
    "encdec.rate",
    "max of the two terms instead of the min (no warmup, then a rate that grows)",
    lambda step, d, factor, warmup: factor * d**-0.5 * max(max(step, 1) ** -0.5, max(step, 1) * warmup**-1.5),
)

# (logits, target, smoothing, pad_id, conv)
_SMOOTHING = "encdec.label_smoothing"
_undeclared(_SMOOTHING, ("label_smoothing", "smoothing_loss"), o.label_smoothing_loss)
KNOWN_BUGS.add(
    _SMOOTHING,
    "padding rows counted in the mean",
    lambda logits, target, eps, pad, conv: o.label_smoothing_loss(logits, target, eps, pad, conv, count_pad=True),
)


@KNOWN_BUGS.register(_SMOOTHING, "smoothing mass on the padding class")
def _with_pad_mass(logits, target, smoothing, pad_id, conv: Conventions):
    """The annotated distribution without zeroing the padding class (ε / (V − 2) on it too)."""
    vocab = logits.shape[-1]
    log_p = torch.log_softmax(o.f64(logits), dim=-1)
    keep = target != pad_id
    q = torch.full((int(keep.sum()), vocab), smoothing / (vocab - 2), dtype=F64)
    q.scatter_(1, target[keep].unsqueeze(1), 1 - smoothing)
    rows = -(q * log_p[keep]).sum(-1)
    if conv.smoothing_loss == "kl":
        rows = rows + torch.xlogy(q, q).sum(-1)
    return rows.mean()


KNOWN_BUGS.add(
    _SMOOTHING,
    "summed over rows instead of the mean",
    lambda logits, target, eps, pad, conv: (
        o.label_smoothing_loss(logits, target, eps, pad, conv) * (target != pad).sum()
    ),
)


# --- extended items ---------------------------------------------------------------------------------------
KNOWN_BUGS.add(
    "encdec.alibi", "slopes 2^(−8(k−1)/h) (k from 0)", lambda heads, n: o.alibi_bias(heads, n) * 2.0 ** (8.0 / heads)
)
# local attention: (seq_len, window) -> the mask the bug builds
KNOWN_BUGS.add(
    "encdec.local_attention", "window includes j = i − w (w + 1 keys)", lambda n, w: o.local_mask(n, w, low=1)
)
KNOWN_BUGS.add(
    "encdec.local_attention", "window of w − 1 keys (j = i − w + 1 excluded)", lambda n, w: o.local_mask(n, w, low=-1)
)
KNOWN_BUGS.add(
    "encdec.local_attention",
    "not causal: keys on both sides within the window (|i − j| < w)",
    lambda n, w: o.local_mask(n, w, causal=False),
)
KNOWN_BUGS.add("encdec.local_attention", "window ignored (causal only)", lambda n, w: o.local_mask(n, n))
KNOWN_BUGS.add(
    "encdec.local_attention", "polarity inverted (True must mean 'may attend')", lambda n, w: ~o.local_mask(n, w)
)


# checkpointing: (d_model, heads, d_ff, weights, x, src_mask, grad_output, conv) -> (output, gradients)
@KNOWN_BUGS.register(
    "encdec.checkpointing",
    "the checkpointed layer's input detached (or not requiring grad): no gradient reaches in_features",
)
def _input_detached(d, h, d_ff, w, x, mask, grad_output, conv):
    out, grads = o.encoder_layer_gradients(d, h, d_ff, w, x, mask, grad_output, conv)
    return out, {**grads, "in_features": torch.zeros_like(grads["in_features"])}


# RoPE is SPEC §2's rule: its known bugs are §2's (x, positions, theta), on §2's float64 oracle
for _bug in nn_bugs.KNOWN_BUGS.of("2.rope"):
    KNOWN_BUGS.add("encdec.rope", _bug.cause, _bug.replay)
