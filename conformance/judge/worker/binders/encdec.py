"""Binder of the encdec profile (SPEC §6.2): a reader's module that retypes
the annotated notes (``make_model``, ``EncoderDecoder``,
``MultiHeadedAttention``, ``PositionwiseFeedForward``, ``LayerNorm``,
``PositionalEncoding``, ``subsequent_mask``, ``greedy_decode``,
``LabelSmoothing``, ``rate``) becomes the profile's adapter functions, with
no adapter file. How the module was loaded (a ``.py`` file, a package, a
notebook's cells) does not matter here: the binder receives a module.

A module that defines adapter functions itself (``run_*``) is an adapter:
it is passed through as it is. A module without them that defines at least
``MIN_NAMES`` of the notes' names is bound by those names (a
``get_conventions`` of its own overrides the notes' conventions).

What the binder knows of the notes:

- their conventions: pre-norm with a final LayerNorm after each stack, their
  LayerNorm (``a_2 · (x − mean) / (std + eps) + b_2``, the unbiased std, eps
  1e-6), log-probabilities out of the generator, the KL label-smoothing loss,
  biased attention projections (unless the module's own attention has none);
  a module that differs defines ``get_conventions()`` itself;
- their parts, taken from ``make_model(src_vocab, tgt_vocab, N, d_model, d_ff,
  h, dropout)`` (a layer is ``model.encoder.layers[0]``) and loaded under their
  state-dict keys (``linears.0`` … ``linears.3``, ``w_1``/``w_2``,
  ``sublayer.i.norm.a_2``/``b_2``, ``src_embed.0.lut``, ``generator.proj``);
- their persistent position buffer (``src_embed.1.pe``: not a weight, the
  module keeps its own) and their generator's bias (the profile's generator
  has none: zeros are loaded);
- their ``greedy_decode``, which decodes one sentence: it is called per
  batch row; with ``end_id`` a row is cut after its first ``end_id`` and
  padded with it, and decoding stops when every row has ended (greedy
  decoding of a row never depends on what follows);
- their criterion's use: ``SimpleLossCompute`` flattens the scores to
  ``(rows, vocab)`` and the training loop divides the summed loss by the
  number of real tokens;
- their masks: ``Batch(src, tgt, pad)`` (``src_mask``, ``make_std_mask``).
"""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

#: the profile's adapter functions (conformance/profiles/encdec.py; tests/test_encdec.py checks the two agree)
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
#: the notes' names (SPEC §6.2); a module defining most of them is theirs
NAMES = (
    "make_model",
    "EncoderDecoder",
    "MultiHeadedAttention",
    "PositionwiseFeedForward",
    "LayerNorm",
    "PositionalEncoding",
    "subsequent_mask",
    "greedy_decode",
    "LabelSmoothing",
    "rate",
)
#: how many of ``NAMES`` make a module the notes' (without adapter functions of its own)
MIN_NAMES = 5
#: adapter function -> the notes' names it is built from
NEEDS: dict[str, tuple[str, ...]] = {
    "get_conventions": ("MultiHeadedAttention",),
    "run_sinusoidal_positions": ("PositionalEncoding",),
    "run_source_mask": ("Batch",),
    "run_target_mask": ("Batch",),
    "run_attention": ("attention", "MultiHeadedAttention"),
    "run_multihead_attention": ("MultiHeadedAttention",),
    "run_feed_forward": ("PositionwiseFeedForward",),
    "run_layer_norm": ("LayerNorm",),
    "run_encoder_layer": ("make_model",),
    "run_decoder_layer": ("make_model",),
    "run_encoder_decoder": ("make_model",),
    "run_greedy_decode": ("make_model", "greedy_decode"),
    "run_rate": ("rate",),
    "run_label_smoothing_loss": ("LabelSmoothing",),
}
#: one part of a profile key -> the notes' key parts
_PARTS = {
    "q_proj": "linears.0",
    "k_proj": "linears.1",
    "v_proj": "linears.2",
    "out_proj": "linears.3",
    "ffn": "feed_forward",
    "fc1": "w_1",
    "fc2": "w_2",
    "cross_attn": "src_attn",
    "norm1": "sublayer.0.norm",
    "norm2": "sublayer.1.norm",
    "norm3": "sublayer.2.norm",
    "src_embed": "src_embed.0.lut",
    "tgt_embed": "tgt_embed.0.lut",
    "generator": "generator.proj",
}
_NORM = {"weight": "a_2", "bias": "b_2"}


def prepare(data: dict[str, Path]) -> None:
    """Nothing to prepare: the notes need no data file."""


class WeightsMismatch(KeyError):
    """The judge's weights do not fit the notes' module under their keys."""

    def __str__(self) -> str:
        return str(self.args[0])


def rename(key: str, *, norm: bool = False) -> str:
    """One profile key -> the notes' key (``decoder.layers.1.norm3.weight`` ->
    ``decoder.layers.1.sublayer.2.norm.a_2``). ``norm``: the key belongs to a
    bare LayerNorm (``weight`` -> ``a_2``)."""
    out: list[str] = []
    for part in key.split("."):
        if part in _NORM and (norm or (out and out[-1] == "norm")):
            out.append(_NORM[part])
        else:
            out.extend(_PARTS.get(part, part).split("."))
    return ".".join(out)


def load(module: torch.nn.Module, weights: Mapping[str, Any], *, norm: bool = False) -> torch.nn.Module:
    """``weights`` (profile keys) into ``module`` (the notes' keys), strictly:
    every parameter given, nothing unknown; buffers (the position table) stay
    the module's own, the generator's bias is loaded as zeros."""
    given = {rename(k, norm=norm): v for k, v in weights.items()}
    state = module.state_dict()
    params = {name for name, _ in module.named_parameters()}
    for name in params - set(given):
        if name == "generator.proj.bias":  # the profile's generator has no bias
            given[name] = torch.zeros_like(state[name])
    unexpected = sorted(set(given) - set(state))
    missing = sorted(params - set(given))
    if unexpected or missing:
        hint = ""
        if any(k.endswith(".bias") and ".linears." in k for k in unexpected):
            hint = " (attention without biases: declare attention_bias=False in get_conventions())"
        raise WeightsMismatch(
            f"{type(module).__name__}'s state dict does not have the notes' keys: keys it lacks {unexpected[:6]}, "
            f"parameters not given {missing[:6]}{hint}"
        )
    for name, value in given.items():
        if tuple(state[name].shape) != tuple(value.shape):
            raise WeightsMismatch(
                f"{type(module).__name__}.{name}: given {tuple(value.shape)}, the module has {tuple(state[name].shape)}"
            )
    module.load_state_dict({**state, **given}, strict=True)
    return module.eval()


def _rows_to_end(rows: list[torch.Tensor], end_id: int | None, max_len: int) -> torch.Tensor:
    """Per-row greedy outputs (each ``(max_len,)``) under the profile's stopping
    rule: a row is cut after its first ``end_id`` (position ≥ 1) and padded
    with it; the output stops when every row has ended."""
    out = torch.stack(rows)
    if end_id is None:
        return out
    ends = []
    for r in range(out.shape[0]):
        hits = (out[r, 1:] == end_id).nonzero()
        if hits.numel():
            first = int(hits[0]) + 1
            out[r, first:] = end_id
            ends.append(first + 1)
        else:
            ends.append(None)
    if all(e is not None for e in ends):
        out = out[:, : max(ends)]
    return out


class _Notes:
    """The adapter functions over a module holding the notes' names."""

    def __init__(self, names: Mapping[str, Any]) -> None:
        self.names = names

    # --- conventions and formulas --------------------------------------------------
    def get_conventions(self) -> dict[str, Any]:
        mha = self.names["MultiHeadedAttention"](1, 2, dropout=0.0)
        biased = all(getattr(lin, "bias", None) is not None for lin in getattr(mha, "linears", ()))
        return {
            "norm": "pre",
            "layer_norm": "annotated",
            "output": "log_probs",
            "smoothing_loss": "kl",
            "attention_bias": biased,
        }

    def run_sinusoidal_positions(self, max_len: int, d_model: int) -> torch.Tensor:
        return self.names["PositionalEncoding"](d_model, 0.0, max_len).pe.detach()

    def run_source_mask(self, src: torch.Tensor, pad_id: int) -> torch.Tensor:
        return self.names["Batch"](src, None, pad_id).src_mask

    def run_target_mask(self, tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
        return self.names["Batch"].make_std_mask(tgt, pad_id)

    def run_rate(self, step: int, d_model: int, factor: float, warmup: int) -> float:
        return float(self.names["rate"](step, d_model, factor, warmup))

    def run_label_smoothing_loss(self, logits, target, smoothing: float, pad_id: int) -> torch.Tensor:
        # as the notes' SimpleLossCompute: scores flattened to (rows, vocab), the sum divided by the real tokens
        vocab = logits.shape[-1]
        criterion = self.names["LabelSmoothing"](vocab, pad_id, smoothing)
        flat = target.reshape(-1)
        with torch.no_grad():
            return criterion(logits.reshape(-1, vocab), flat) / (flat != pad_id).sum()

    # --- parts --------------------------------------------------------------------------
    @torch.no_grad()
    def run_attention(self, Q, K, V, mask=None) -> torch.Tensor:
        return self.names["attention"](Q, K, V, mask)[0]

    @torch.no_grad()
    def run_multihead_attention(self, d_model, num_heads, weights, query, key, value, mask=None) -> torch.Tensor:
        mha = load(self.names["MultiHeadedAttention"](num_heads, d_model, dropout=0.0), weights)
        return mha(query, key, value, mask)

    @torch.no_grad()
    def run_feed_forward(self, d_model, d_ff, weights, in_features) -> torch.Tensor:
        return load(self.names["PositionwiseFeedForward"](d_model, d_ff, dropout=0.0), weights)(in_features)

    @torch.no_grad()
    def run_layer_norm(self, d_model, weights, in_features) -> torch.Tensor:
        return load(self.names["LayerNorm"](d_model), weights, norm=True)(in_features)

    def _model(self, src_vocab: int, tgt_vocab: int, d_model: int, layers: int, heads: int, d_ff: int):
        return self.names["make_model"](src_vocab, tgt_vocab, layers, d_model, d_ff, heads, 0.0)

    @torch.no_grad()
    def run_encoder_layer(self, d_model, num_heads, d_ff, weights, in_features, src_mask) -> torch.Tensor:
        layer = load(self._model(3, 3, d_model, 1, num_heads, d_ff).encoder.layers[0], weights)
        return layer(in_features, src_mask)

    @torch.no_grad()
    def run_decoder_layer(
        self, d_model, num_heads, d_ff, weights, in_features, memory, src_mask, tgt_mask
    ) -> torch.Tensor:
        layer = load(self._model(3, 3, d_model, 1, num_heads, d_ff).decoder.layers[0], weights)
        return layer(in_features, memory, src_mask, tgt_mask)

    @torch.no_grad()
    def run_encoder_decoder(
        self, src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff, weights, src, tgt, src_mask,
        tgt_mask,
    ) -> torch.Tensor:  # fmt: skip
        model = load(self._model(src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff), weights)
        return model.generator(model(src, tgt, src_mask, tgt_mask))

    @torch.no_grad()
    def run_greedy_decode(
        self, src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff, weights, src, src_mask,
        max_len, start_id, end_id=None,
    ) -> torch.Tensor:  # fmt: skip
        model = load(self._model(src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff), weights)
        rows = []
        for r in range(src.shape[0]):  # the notes' greedy_decode decodes one sentence
            mask = None if src_mask is None else src_mask[r : r + 1]
            out = self.names["greedy_decode"](model, src[r : r + 1], mask, max_len, start_id)
            rows.append(torch.as_tensor(out).reshape(-1).long())
        return _rows_to_end(rows, end_id, max_len)


def bind(module: Any) -> dict[str, Callable[..., Any]]:
    """The module's own public callables; for a module of the notes (most of
    their names, no ``run_*`` function of its own) also the adapter functions
    their names allow (its own ``get_conventions`` wins)."""
    own = {n: getattr(module, n) for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))}
    if any(n in own for n in FUNCTIONS if n.startswith("run_")) or sum(n in own for n in NAMES) < MIN_NAMES:
        return own  # an adapter (or not the notes): as it is
    present = {n: own[n] for needs in NEEDS.values() for n in needs if n in own}
    notes = _Notes(present)
    bound = {fn: getattr(notes, fn) for fn, needs in NEEDS.items() if all(n in present for n in needs)}
    return {**own, **bound, **{n: own[n] for n in ("get_conventions",) if n in own}}
