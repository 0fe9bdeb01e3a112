"""Oracles of the encdec profile (SPEC §6.2), all in float64 and computed
apart from the implementation: torch's own ``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer`` with the
implementation's weights mapped in (``in_proj_weight`` = Q, K, V stacked;
``norm_first`` and the activation as declared; the annotated LayerNorm put in
place of theirs when declared), and explicit formulas for positions, the
LayerNorm variants, the rate rule and label smoothing. The model oracle
chains those layers; greedy decoding is the same loop over it.

Masks here are the profile's: boolean, True = may attend. torch's take True
= masked out, so they are inverted and spread over the heads on the way in.
Every function takes ``conv`` (``conventions.Conventions``): a hint replays
a bug, or another convention, through the same functions.
"""

import math
from collections.abc import Callable, Mapping
from functools import partial

import torch
from torch import Tensor

from lmspec.conformance.encdec.conventions import PAPER, Conventions

F64 = torch.float64


def f64(x: Tensor) -> Tensor:
    return torch.as_tensor(x).detach().to("cpu", F64).clone()


# --- formulas -----------------------------------------------------------------------------------
def positions(max_len: int, d_model: int, *, swap: bool = False, halves: bool = False) -> Tensor:
    """``PE[pos, 2i] = sin(pos / 10000^(2i/d))``, ``PE[pos, 2i+1] = cos(...)``.
    Replays: ``swap`` (cos on even columns), ``halves`` (sines then cosines)."""
    pe = torch.empty(max_len, d_model, dtype=F64)
    pos = torch.arange(max_len, dtype=F64)
    for col in range(d_model):
        i2 = col - col % 2
        angle = pos / 10000.0 ** (i2 / d_model)
        pe[:, col] = torch.cos(angle) if (col % 2 == 1) != swap else torch.sin(angle)
    if halves:
        pe = torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)
    return pe


def alibi_bias(num_heads: int, seq_len: int) -> Tensor:
    """``bias[h, i, j] = −m_h (i − j)``, slopes ``m_h = 2^(−8k/h)``, k = 1..h
    (the rule holds for j ≤ i; above the diagonal it is the same formula)."""
    slopes = torch.tensor([2.0 ** (-8.0 * k / num_heads) for k in range(1, num_heads + 1)], dtype=F64)
    pos = torch.arange(seq_len, dtype=F64)
    return -slopes.view(-1, 1, 1) * (pos.view(-1, 1) - pos)


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, variant: str, *, eps: float | None = None) -> Tensor:
    return _normalize(f64(x), f64(weight), f64(bias), variant, eps)


def _normalize(x: Tensor, weight: Tensor, bias: Tensor, variant: str, eps: float | None) -> Tensor:
    """``layer_norm`` on float64 tensors as given (differentiable: no copies)."""
    mean = x.mean(-1, keepdim=True)
    if variant == "biased":
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        out = (x - mean) / torch.sqrt(var + (1e-5 if eps is None else eps))
    elif variant == "annotated":
        std = torch.sqrt(((x - mean) ** 2).sum(-1, keepdim=True) / (x.shape[-1] - 1))
        out = (x - mean) / (std + (1e-6 if eps is None else eps))
    else:
        raise ValueError(variant)
    return weight * out + bias


#: the epsilons codebases use (torch 1e-5, the annotated notes 1e-6, BERT-style code 1e-12)
NORM_EPSILONS = (1e-5, 1e-6, 1e-12)


def layer_norm_as(x: Tensor, weight: Tensor, bias: Tensor, *, unbiased: bool, inside: bool, eps: float) -> Tensor:
    """``gain · (x − mean) / sqrt(var + eps) + bias`` (``inside``) or ``/ (std + eps)``,
    the variance biased (÷ n) or ``unbiased`` (÷ n − 1): every placement the texts use."""
    x = f64(x)
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / (x.shape[-1] - (1 if unbiased else 0))
    scale = torch.sqrt(var + eps) if inside else torch.sqrt(var) + eps
    return f64(weight) * (x - mean) / scale + f64(bias)


class _AnnotatedNorm(torch.nn.Module):
    def __init__(self, weight: Tensor, bias: Tensor) -> None:
        super().__init__()
        self.weight, self.bias = f64(weight), f64(bias)

    def forward(self, x: Tensor) -> Tensor:
        return _normalize(x, self.weight, self.bias, "annotated", None)


def rate(step: int, d_model: int, factor: float, warmup: int) -> float:
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def smoothed(target: Tensor, vocab: int, smoothing: float, pad_id: int, variant: str) -> Tensor:
    """Rows of the target distribution q (float64)."""
    rows = target.reshape(-1).tolist()
    q = torch.empty(len(rows), vocab, dtype=F64)
    for r, t in enumerate(rows):
        if variant == "annotated":
            q[r] = smoothing / (vocab - 2)
            q[r, pad_id] = 0.0
            q[r, t] = 1.0 - smoothing
        elif variant == "others":
            q[r] = smoothing / (vocab - 1)
            q[r, t] = 1.0 - smoothing
        else:
            q[r] = smoothing / vocab
            q[r, t] += 1.0 - smoothing
    return q


def label_smoothing_loss(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int, conv: Conventions = PAPER, *, count_pad=False
) -> Tensor:
    """Mean over non-padding rows of ``−Σ q log p`` (or the KL). Replay:
    ``count_pad`` (padding rows kept in the mean)."""
    vocab = logits.shape[-1]
    log_p = torch.log_softmax(f64(logits).reshape(-1, vocab), dim=-1)
    target = target.reshape(-1)
    keep = torch.ones_like(target, dtype=torch.bool) if count_pad else target != pad_id
    q = smoothed(target[keep], vocab, smoothing, pad_id, conv.label_smoothing)
    rows = -(q * log_p[keep]).sum(-1)
    if conv.smoothing_loss == "kl":
        rows = rows + torch.xlogy(q, q).sum(-1)
    return rows.sum() / keep.sum()


# --- attention ------------------------------------------------------------------------------------
def attention(
    Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None = None, *, scale: float | None = None, fill: float = -math.inf
) -> Tensor:
    """softmax(Q Kᵀ · scale, masked ``fill``) V in float64 (scale 1/√d_k by
    default). The −∞ fill gives a fully masked row NaN; ``UNIFORM_FILL`` gives
    it uniform weights (the declared default, masked_row="uniform")."""
    q, k, v = f64(Q), f64(K), f64(V)
    scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = scores.masked_fill(~mask.to("cpu", torch.bool), fill)
    return torch.softmax(scores, dim=-1) @ v


#: the lowest float64: a masked key's weight is exp(min − max) = 0, a fully masked row is uniform
UNIFORM_FILL = torch.finfo(F64).min


def _heads_mask(mask: Tensor | None, batch: int, heads: int, n: int, m: int) -> Tensor | None:
    """The profile's mask (True = attend, broadcasting to (batch, n, m)) as torch's
    (batch·heads, n, m) with True = masked out."""
    if mask is None:
        return None
    full = mask.to("cpu", torch.bool).expand(batch, n, m)
    return (~full).repeat_interleave(heads, dim=0)


def _mha_state(weights: Mapping[str, Tensor], prefix: str = "") -> dict[str, Tensor]:
    """torch's state dict from the profile's keys; a projection without a bias
    (declared ``attention_bias=False``: the implementation got none) has zeros."""
    w = {k: f64(v) for k, v in weights.items()}

    def bias(p: str) -> Tensor:
        weight = w[f"{prefix}{p}_proj.weight"]
        return w.get(f"{prefix}{p}_proj.bias", torch.zeros(weight.shape[0], dtype=F64))

    return {
        "in_proj_weight": torch.cat([w[f"{prefix}{p}_proj.weight"] for p in "qkv"]),
        "in_proj_bias": torch.cat([bias(p) for p in "qkv"]),
        "out_proj.weight": w[f"{prefix}out_proj.weight"],
        "out_proj.bias": bias("out"),
    }


def mha(
    d_model: int, num_heads: int, weights: Mapping[str, Tensor], query, key, value, mask=None, *, uniform=False
) -> Tensor:
    """torch.nn.MultiheadAttention (float64, batch_first) with the Q, K, V
    weights stacked. A fully masked row is NaN, or uniform with ``uniform``."""
    layer = torch.nn.MultiheadAttention(d_model, num_heads, dropout=0.0, batch_first=True, dtype=F64)
    layer.load_state_dict(_mha_state(weights))
    q, k, v = f64(query), f64(key), f64(value)
    masked = _heads_mask(mask, q.shape[0], num_heads, q.shape[1], k.shape[1])
    if uniform and masked is not None:  # an additive mask of the lowest float64 instead of −∞
        masked = torch.zeros(masked.shape, dtype=F64).masked_fill(masked, UNIFORM_FILL)
    with torch.no_grad():
        out, _ = layer(q, k, v, attn_mask=masked, need_weights=False)
    return out


def _tanh_gelu(x: Tensor) -> Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh")


def feed_forward(weights: Mapping[str, Tensor], x: Tensor, activation: str = "relu") -> Tensor:
    """``activation``: "relu", "gelu" (exact) or "gelu_tanh" (the tanh approximation)."""
    w = {k: f64(v) for k, v in weights.items()}
    hidden = f64(x) @ w["fc1.weight"].T + w["fc1.bias"]
    if activation == "relu":
        hidden = torch.relu(hidden)
    else:
        hidden = _tanh_gelu(hidden) if activation == "gelu_tanh" else torch.nn.functional.gelu(hidden)
    return hidden @ w["fc2.weight"].T + w["fc2.bias"]


# --- layers -------------------------------------------------------------------------------------------
def _sub(weights: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}


def _torch_layer(kind: str, d_model: int, num_heads: int, d_ff: int, weights: Mapping[str, Tensor], conv: Conventions):
    cls = torch.nn.TransformerEncoderLayer if kind == "encoder" else torch.nn.TransformerDecoderLayer
    activation = _tanh_gelu if conv.activation == "gelu_tanh" else conv.activation
    layer = cls(
        d_model,
        num_heads,
        d_ff,
        dropout=0.0,
        activation=activation,
        layer_norm_eps=1e-5,
        batch_first=True,
        norm_first=conv.norm == "pre",
        dtype=F64,
    )
    w = {k: f64(v) for k, v in weights.items()}
    state = {
        **{f"self_attn.{k}": v for k, v in _mha_state(w, "self_attn.").items()},
        "linear1.weight": w["ffn.fc1.weight"],
        "linear1.bias": w["ffn.fc1.bias"],
        "linear2.weight": w["ffn.fc2.weight"],
        "linear2.bias": w["ffn.fc2.bias"],
    }
    norms = ("norm1", "norm2") if kind == "encoder" else ("norm1", "norm2", "norm3")
    if kind == "decoder":
        state.update({f"multihead_attn.{k}": v for k, v in _mha_state(w, "cross_attn.").items()})
    for n in norms:
        state[f"{n}.weight"], state[f"{n}.bias"] = w[f"{n}.weight"], w[f"{n}.bias"]
    layer.load_state_dict(state)
    if conv.layer_norm == "annotated":
        for n in norms:
            setattr(layer, n, _AnnotatedNorm(w[f"{n}.weight"], w[f"{n}.bias"]))
    # train mode with dropout 0: the same function, and never torch's fused fast path
    return layer.train()


def encoder_layer(d_model, num_heads, d_ff, weights, x, src_mask, conv: Conventions = PAPER) -> Tensor:
    layer = _torch_layer("encoder", d_model, num_heads, d_ff, weights, conv)
    x = f64(x)
    n = x.shape[1]
    with torch.no_grad():
        return layer(x, src_mask=_heads_mask(src_mask, x.shape[0], num_heads, n, n))


def encoder_layer_gradients(
    d_model, num_heads, d_ff, weights, x, src_mask, grad_output, conv: Conventions = PAPER
) -> tuple[Tensor, dict[str, Tensor]]:
    """torch's encoder layer (as ``encoder_layer``) and the gradients of
    ``(output · grad_output).sum()`` w.r.t. ``x`` (key ``"in_features"``) and
    every weight, under the profile's key names (the stacked ``in_proj``
    gradients split back into Q, K, V)."""
    layer = _torch_layer("encoder", d_model, num_heads, d_ff, weights, conv)
    norms = {}
    if conv.layer_norm == "annotated":
        for n in ("norm1", "norm2"):
            norm = getattr(layer, n)
            norm.weight.requires_grad_(True)
            norm.bias.requires_grad_(True)
            norms[f"{n}.weight"], norms[f"{n}.bias"] = norm.weight, norm.bias
    x = f64(x).requires_grad_(True)
    n = x.shape[1]
    out = layer(x, src_mask=_heads_mask(src_mask, x.shape[0], num_heads, n, n))
    out.backward(f64(grad_output))
    p = dict(layer.named_parameters())
    grads = {"in_features": x.grad}
    for kind, part in (("weight", "in_proj_weight"), ("bias", "in_proj_bias")):
        for name, chunk in zip("qkv", p[f"self_attn.{part}"].grad.chunk(3)):
            grads[f"self_attn.{name}_proj.{kind}"] = chunk
    for kind in ("weight", "bias"):
        grads[f"self_attn.out_proj.{kind}"] = p[f"self_attn.out_proj.{kind}"].grad
        grads[f"ffn.fc1.{kind}"] = p[f"linear1.{kind}"].grad
        grads[f"ffn.fc2.{kind}"] = p[f"linear2.{kind}"].grad
        for norm in ("norm1", "norm2"):
            key = f"{norm}.{kind}"
            grads[key] = norms[key].grad if key in norms else p[key].grad
    # only what the implementation was given (no attention biases when it declares none)
    return out.detach(), {k: v for k, v in grads.items() if k == "in_features" or k in weights}


def decoder_layer(
    d_model, num_heads, d_ff, weights, x, memory, src_mask, tgt_mask, conv: Conventions = PAPER
) -> Tensor:
    layer = _torch_layer("decoder", d_model, num_heads, d_ff, weights, conv)
    x, memory = f64(x), f64(memory)
    b, n, m = x.shape[0], x.shape[1], memory.shape[1]
    with torch.no_grad():
        return layer(
            x,
            memory,
            tgt_mask=_heads_mask(tgt_mask, b, num_heads, n, n),
            memory_mask=_heads_mask(src_mask, b, num_heads, n, m),
        )


# --- layers as formulas: a composite with one of the implementation's parts in ---------------------
#: oracle part name -> callable, with the signatures of this module's functions
#: (``mha``, ``feed_forward``, ``layer_norm``, ``attention``, ``encoder_layer``,
#: ``decoder_layer``): a composite's failure its failing part explains
#: (conformance/encdec/parts.py, hints.part_hints)
Parts = Mapping[str, Callable[..., Tensor]]
#: where a residual block adds its input: ``"sublayer"`` (the rule: post-norm
#: LN(x + sublayer(x)), pre-norm x + sublayer(LN(x))), ``"norm"`` (around the
#: norm: x + LN(sublayer(x))), ``"none"`` (no residual)
RESIDUALS = ("sublayer", "norm", "none")


def mha_formula(d_model, num_heads, weights, query, key, value, mask=None, *, parts: Parts = {}) -> Tensor:  # noqa: B006
    """``mha`` written out: the projections, heads as contiguous blocks of
    d_model / h, ``parts["attention"]`` (default ``attention``) per head on
    (batch, heads, n, d_k), the heads concatenated, the output projection."""
    w = {k: f64(v) for k, v in weights.items()}

    def project(name: str, x) -> Tensor:
        out = f64(x) @ w[f"{name}_proj.weight"].T
        return out + w[f"{name}_proj.bias"] if f"{name}_proj.bias" in w else out

    b, n, m, d_k = query.shape[0], query.shape[1], key.shape[1], d_model // num_heads
    q = project("q", query).view(b, n, num_heads, d_k).transpose(1, 2)
    k = project("k", key).view(b, m, num_heads, d_k).transpose(1, 2)
    v = project("v", value).view(b, m, num_heads, d_k).transpose(1, 2)
    heads_mask = None if mask is None else mask.to("cpu", torch.bool).expand(b, n, m).unsqueeze(1)
    att = f64(parts.get("attention", attention)(q, k, v, heads_mask))
    return project("out", att.transpose(1, 2).reshape(b, n, d_model))


def _residual_block(x: Tensor, sublayer, norm, conv: Conventions, residual: str) -> Tensor:
    if residual == "norm":
        return x + norm(sublayer(x))
    pre = conv.norm == "pre"
    if residual == "none":
        return sublayer(norm(x)) if pre else norm(sublayer(x))
    return x + sublayer(norm(x)) if pre else norm(x + sublayer(x))


class _Sublayers:
    """The sublayers of one layer's weights, each from ``parts`` where given."""

    def __init__(self, d_model, num_heads, weights, conv: Conventions, parts: Parts, norms: Mapping[str, str]):
        self.d, self.h, self.w, self.conv, self.parts = d_model, num_heads, weights, conv, parts
        self.norms = dict(norms)  # the layer's norm -> the weights it reads (a swap replays norms mixed up)

    def norm(self, name: str):
        w, ln = self.w, self.parts.get("layernorm", layer_norm)
        used = self.norms.get(name, name)
        return lambda t: f64(ln(t, w[f"{used}.weight"], w[f"{used}.bias"], self.conv.layer_norm))

    def attend(self, name: str, memory=None, mask=None):
        att = self.parts.get("mha", partial(mha_formula, parts=self.parts))
        sub = _sub(self.w, f"{name}.")
        if memory is None:
            return lambda t: f64(att(self.d, self.h, sub, t, t, t, mask))
        return lambda t: f64(att(self.d, self.h, sub, t, memory, memory, mask))

    def ffn(self):
        ff = self.parts.get("ffn", feed_forward)
        return lambda t: f64(ff(_sub(self.w, "ffn."), t, self.conv.activation))


def encoder_layer_formula(
    d_model,
    num_heads,
    d_ff,
    weights,
    x,
    src_mask,
    conv: Conventions = PAPER,
    *,
    parts: Parts | None = None,
    residual: str = "sublayer",
    norms: Mapping[str, str] | None = None,
) -> Tensor:
    """``encoder_layer`` written out (torch's layer is the oracle; this one
    takes ``parts`` and replays): self-attention under the source mask, then
    the FFN, each in a residual block (``residual``: RESIDUALS); ``norms``:
    a norm reading another norm's weights (``{"norm1": "norm2", ...}``)."""
    s = _Sublayers(d_model, num_heads, weights, conv, parts or {}, norms or {})
    x = _residual_block(f64(x), s.attend("self_attn", mask=src_mask), s.norm("norm1"), conv, residual)
    return _residual_block(x, s.ffn(), s.norm("norm2"), conv, residual)


def decoder_layer_formula(
    d_model,
    num_heads,
    d_ff,
    weights,
    x,
    memory,
    src_mask,
    tgt_mask,
    conv: Conventions = PAPER,
    *,
    parts: Parts | None = None,
    residual: str = "sublayer",
    norms: Mapping[str, str] | None = None,
    memory_from: str | None = None,
) -> Tensor:
    """``decoder_layer`` written out: masked self-attention, cross-attention
    over ``memory`` under the source mask, the FFN. Replays as
    ``encoder_layer_formula``'s, and ``memory_from`` (cross-attention's keys
    and values not from ``memory``: ``"input"``, the layer's input x;
    ``"hidden"``, the decoder's running state, the cross-attention's own
    input; unmasked: a source mask does not fit the decoder's length)."""
    s = _Sublayers(d_model, num_heads, weights, conv, parts or {}, norms or {})
    x = layer_input = f64(x)
    x = _residual_block(x, s.attend("self_attn", mask=tgt_mask), s.norm("norm1"), conv, residual)
    if memory_from == "hidden":
        cross = s.attend("cross_attn", mask=None)
    else:
        memory, src_mask = (layer_input, None) if memory_from == "input" else (f64(memory), src_mask)
        cross = s.attend("cross_attn", memory, src_mask)
    x = _residual_block(x, cross, s.norm("norm2"), conv, residual)
    return _residual_block(x, s.ffn(), s.norm("norm3"), conv, residual)


# --- the model ---------------------------------------------------------------------------------------
def embed(table: Tensor, ids: Tensor, d_model: int, *, scale: bool = True, positions_first: bool = False) -> Tensor:
    """``E[ids] · sqrt(d) + PE``. Replays: ``scale=False``; ``positions_first``
    (``(E[ids] + PE) · sqrt(d)``)."""
    x = f64(table)[ids.to("cpu").long()]
    pe = positions(ids.shape[-1], d_model)
    if positions_first:
        return (x + pe) * math.sqrt(d_model)
    return x * (math.sqrt(d_model) if scale else 1.0) + pe


class Model:
    """The oracle model, its torch layers built once (greedy decoding reuses them).

    ``parts`` (the implementation's parts, ``Parts``; "encoder_layer",
    "decoder_layer" and "positions" too): the layers written out with those
    parts in. Replays: ``embed_bugs`` (``embed``'s), ``encoder_mask=False``
    (the encoder's self-attention unmasked: the source mask in
    cross-attention only), ``cross_mask=False`` (cross-attention unmasked),
    ``target_table`` (the table target ids are embedded with)."""

    def __init__(
        self,
        sizes,
        weights,
        conv: Conventions = PAPER,
        *,
        parts: Parts | None = None,
        encoder_mask: bool = True,
        cross_mask: bool = True,
        target_table: str = "tgt_embed.weight",
        **embed_bugs,
    ) -> None:
        _, _, self.d_model, num_layers, num_heads, d_ff = sizes
        self.weights, self.conv, self.embed_bugs, self.num_heads = weights, conv, embed_bugs, num_heads
        self.parts, self.encoder_mask, self.cross_mask, self.target_table = (
            parts,
            encoder_mask,
            cross_mask,
            target_table,
        )
        d = self.d_model
        self.num_layers, self.d_ff = num_layers, d_ff
        if parts is not None:
            return
        self.encoders = [
            _torch_layer("encoder", d, num_heads, d_ff, _sub(weights, f"encoder.layers.{i}."), conv)
            for i in range(num_layers)
        ]
        self.decoders = [
            _torch_layer("decoder", d, num_heads, d_ff, _sub(weights, f"decoder.layers.{i}."), conv)
            for i in range(num_layers)
        ]

    def _final(self, x: Tensor, stack: str) -> Tensor:
        if self.conv.norm != "pre":
            return x
        w = self.weights
        norm = layer_norm if self.parts is None else self.parts.get("layernorm", layer_norm)
        return f64(norm(x, w[f"{stack}.norm.weight"], w[f"{stack}.norm.bias"], self.conv.layer_norm))

    def _embed(self, table: str, ids: Tensor) -> Tensor:
        if self.parts is None or "positions" not in self.parts:
            return embed(self.weights[table], ids, self.d_model, **self.embed_bugs)
        x = f64(self.weights[table])[ids.to("cpu").long()] * math.sqrt(self.d_model)
        return x + f64(self.parts["positions"](ids.shape[-1], self.d_model))

    def _layer(self, kind: str, i: int):
        """The i-th encoder or decoder layer of the written-out model (``parts``)."""
        d, h, ff, parts = self.d_model, self.num_heads, self.d_ff, self.parts
        w = _sub(self.weights, f"{kind}.layers.{i}.")
        if f"{kind}_layer" in parts:
            return lambda *args: f64(parts[f"{kind}_layer"](d, h, ff, w, *args))
        formula = encoder_layer_formula if kind == "encoder" else decoder_layer_formula
        return lambda *args: formula(d, h, ff, w, *args, self.conv, parts=parts)

    @torch.no_grad()
    def encode(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        x = self._embed("src_embed.weight", src)
        src_mask = src_mask if self.encoder_mask else None
        if self.parts is not None:
            for i in range(self.num_layers):
                x = self._layer("encoder", i)(x, src_mask)
            return self._final(x, "encoder")
        mask = _heads_mask(src_mask, x.shape[0], self.num_heads, x.shape[1], x.shape[1])
        for layer in self.encoders:
            x = layer(x, src_mask=mask)
        return self._final(x, "encoder")

    @torch.no_grad()
    def decode(self, memory: Tensor, src_mask: Tensor | None, tgt: Tensor, tgt_mask: Tensor | None) -> Tensor:
        x = self._embed(self.target_table, tgt)
        src_mask = src_mask if self.cross_mask else None
        if self.parts is not None:
            for i in range(self.num_layers):
                x = self._layer("decoder", i)(x, memory, src_mask, tgt_mask)
            return self._final(x, "decoder")
        b, n, m = x.shape[0], x.shape[1], memory.shape[1]
        self_mask = _heads_mask(tgt_mask, b, self.num_heads, n, n)
        cross_mask = _heads_mask(src_mask, b, self.num_heads, n, m)
        for layer in self.decoders:
            x = layer(x, memory, tgt_mask=self_mask, memory_mask=cross_mask)
        return self._final(x, "decoder")

    def generate(self, hidden: Tensor) -> Tensor:
        return generate(self.weights, hidden, self.conv)

    def __call__(self, src, tgt, src_mask, tgt_mask) -> Tensor:
        return self.generate(self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask))


def generate(weights, hidden: Tensor, conv: Conventions = PAPER) -> Tensor:
    logits = hidden @ f64(weights["generator.weight"]).T
    return torch.log_softmax(logits, dim=-1) if conv.output == "log_probs" else logits


def model(sizes, weights, src, tgt, src_mask, tgt_mask, conv: Conventions = PAPER, **replays) -> Tensor:
    """The oracle model's output; ``replays``: ``Model``'s keywords."""
    return Model(sizes, weights, conv, **replays)(src, tgt, src_mask, tgt_mask)


def causal(n: int) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril()


def greedy(
    sizes,
    weights,
    src,
    src_mask,
    max_len: int,
    start_id: int,
    end_id: int | None = None,
    conv: Conventions = PAPER,
    *,
    stop_late: bool = False,
    position: int = -1,
    extra: int = 0,
    append_end: bool = True,
) -> Tensor:
    """The greedy loop over the oracle model. Replays: ``stop_late`` (a row
    that ended keeps decoding instead of being padded with ``end_id``);
    ``position`` (the argmax taken at another position than the last);
    ``extra`` (``max_len + extra`` ids in all); ``append_end=False`` (the
    loop stops when every row has predicted ``end_id``, before appending it)."""
    net = Model(sizes, weights, conv)
    memory = net.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
    ended = torch.zeros(src.shape[0], dtype=torch.bool)
    while ys.shape[1] < max_len + extra:
        hidden = net.decode(memory, src_mask, ys, causal(ys.shape[1]))
        nxt = net.generate(hidden[:, position]).argmax(-1)
        if end_id is not None:
            if not append_end and bool((ended | (nxt == end_id)).all()):
                break
            if not stop_late:
                nxt = nxt.masked_fill(ended, end_id)
            ended = ended | (nxt == end_id)
        ys = torch.cat([ys, nxt.unsqueeze(-1)], dim=-1)
        if end_id is not None and bool(ended.all()):
            break
    return ys


def local_mask(seq_len: int, window: int, *, low: int = 0, causal: bool = True) -> Tensor:
    """Query i sees key j when i − window < j ≤ i (True = may attend).
    Replays: ``low`` (the window's lower edge moved: j > i − window − low),
    ``causal=False`` (|i − j| < window, keys on both sides)."""
    i = torch.arange(seq_len).view(-1, 1)
    j = torch.arange(seq_len)
    if not causal:
        return (i - j).abs() < window
    return (j <= i) & (j > i - window - low)
