"""Masks, attention, multi-head attention, FFN, LayerNorm and sinusoidal
positions of the encoder–decoder Transformer (SPEC §6.2).

Masks are boolean, True = may attend. Every module keeps the state-dict keys
of SPEC §6.2 (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``; ``fc1``,
``fc2``; ``weight``, ``bias``).
"""

import math

import torch
from jaxtyping import Bool, Float, Integer
from torch import Tensor, nn

from lmspec.reference.nn.softmax import softmax


# --- masks -----------------------------------------------------------------------------------
def source_mask(src: Integer[Tensor, "batch src_len"], pad_id: int) -> Bool[Tensor, "batch 1 src_len"]:
    """``src != pad_id`` as ``(batch, 1, src_len)``: every query may see every real source token."""
    return (src != pad_id).unsqueeze(-2)


def causal_mask(n: int, device: torch.device | str | None = None) -> Bool[Tensor, "n n"]:
    """Position i may see j ≤ i (lower triangle, diagonal included)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def target_mask(tgt: Integer[Tensor, "batch tgt_len"], pad_id: int) -> Bool[Tensor, "batch tgt_len tgt_len"]:
    """Not padding (key side) AND causal: query i sees the non-padding keys j ≤ i."""
    return (tgt != pad_id).unsqueeze(-2) & causal_mask(tgt.shape[-1], tgt.device)


# --- attention -------------------------------------------------------------------------------
def attention(
    Q: Float[Tensor, "... n d_k"],
    K: Float[Tensor, "... m d_k"],
    V: Float[Tensor, "... m d_v"],
    mask: Bool[Tensor, "..."] | None = None,
    masked_row: str = "uniform",
) -> Float[Tensor, "... n d_v"]:
    """``softmax(Q Kᵀ / sqrt(d_k)) V`` with masked-out scores removed; ``n`` and
    ``m`` may differ (decoder queries over encoder keys). ``mask`` broadcasts
    against the scores ``(..., n, m)``.

    A query whose keys are all masked: ``"uniform"`` gives it equal weights
    over all its keys (what a large negative fill such as −1e9 does),
    ``"nan"`` gives NaN (what a −∞ fill does).
    """
    scores = (Q @ K.mT) / math.sqrt(Q.shape[-1])
    if mask is None:
        return softmax(scores, dim=-1) @ V
    # the lowest finite value: a partly masked row gives its masked keys
    # exp(min − max) = 0 exactly; a fully masked row is constant, so uniform
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = softmax(scores, dim=-1)
    if masked_row == "nan":
        empty = ~mask.any(dim=-1, keepdim=True)
        weights = weights.masked_fill(empty, math.nan)
    return weights @ V


class Linear(nn.Module):
    """``y = x Wᵀ + b`` with ``W: (d_out, d_in)``, ``b: (d_out,)`` (keys ``weight``, ``bias``;
    ``bias=False``: no ``b``, as the paper's attention projections).

    Init as torch's: uniform on ±1/sqrt(d_in) for both.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        bias: bool = True,
    ) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(d_in)
        self.weight = nn.Parameter(torch.empty(d_out, d_in, device=device, dtype=dtype).uniform_(-bound, bound))
        b = nn.Parameter(torch.empty(d_out, device=device, dtype=dtype).uniform_(-bound, bound)) if bias else None
        self.register_parameter("bias", b)

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_out"]:
        out = x @ self.weight.T
        return out if self.bias is None else out + self.bias


class MultiHeadAttention(nn.Module):
    """``out_proj(concat_h attention(q_proj(query)_h, k_proj(key)_h, v_proj(value)_h))``;
    head h is the contiguous block ``[h·d_k, (h+1)·d_k)`` of the projections,
    ``d_k = d_model / num_heads``. ``mask``: ``(batch, n or 1, m)`` (or anything
    broadcasting against ``(..., n, m)``), shared by all heads."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        masked_row: str = "uniform",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of num_heads ({num_heads})")
        self.num_heads = num_heads
        self.masked_row = masked_row
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            Linear(d_model, d_model, device, dtype, bias) for _ in range(4)
        )

    def _heads(self, x: Float[Tensor, "... len d_model"]) -> Float[Tensor, "... heads len d_k"]:
        return x.unflatten(-1, (self.num_heads, -1)).transpose(-2, -3)

    def forward(
        self,
        query: Float[Tensor, "... n d_model"],
        key: Float[Tensor, "... m d_model"],
        value: Float[Tensor, "... m d_model"],
        mask: Bool[Tensor, "..."] | None = None,
    ) -> Float[Tensor, "... n d_model"]:
        q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(key)), self._heads(self.v_proj(value))
        if mask is not None and mask.dim() >= 3:
            mask = mask.unsqueeze(-3)  # (batch, 1, n|1, m): the same for every head
        out = attention(q, k, v, mask, self.masked_row)
        return self.out_proj(out.transpose(-2, -3).flatten(-2))


# --- feed-forward, LayerNorm, positions ---------------------------------------------------------
def gelu(x: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    """The exact GELU ``x · Φ(x) = x (1 + erf(x / √2)) / 2``."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class FeedForward(nn.Module):
    """``fc2(act(fc1(x)))``: ``fc1: d_model → d_ff``, ``fc2: d_ff → d_model``, both with
    biases; ``act`` ReLU (the paper) or GELU."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str = "relu",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation {activation!r}: expected 'relu' or 'gelu'")
        self.activation = activation
        self.fc1 = Linear(d_model, d_ff, device, dtype)
        self.fc2 = Linear(d_ff, d_model, device, dtype)

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        hidden = self.fc1(x)
        hidden = hidden.clamp_min(0.0) if self.activation == "relu" else gelu(hidden)
        return self.fc2(hidden)


class LayerNorm(nn.Module):
    """Over the last axis, with gain ``weight`` and ``bias``.

    ``"biased"`` (the paper's norm, torch's): ``(x − mean) / sqrt(var + eps)``,
    var the biased (1/d) variance, eps 1e-5. ``"annotated"`` (the annotated
    notes'): ``(x − mean) / (std + eps)``, std the unbiased (1/(d−1)) one, eps 1e-6.
    """

    def __init__(
        self,
        d_model: int,
        variant: str = "biased",
        eps: float | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if variant not in ("biased", "annotated"):
            raise ValueError(f"LayerNorm variant {variant!r}: expected 'biased' or 'annotated'")
        self.variant = variant
        self.eps = (1e-5 if variant == "biased" else 1e-6) if eps is None else eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(d_model, device=device, dtype=dtype))

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        centred = x - x.mean(dim=-1, keepdim=True)
        if self.variant == "biased":
            scaled = centred / torch.sqrt(centred.square().mean(dim=-1, keepdim=True) + self.eps)
        else:
            scaled = centred / (centred.std(dim=-1, keepdim=True, correction=1) + self.eps)
        return self.weight * scaled + self.bias


def sinusoidal_positions(
    max_len: int, d_model: int, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> Float[Tensor, "max_len d_model"]:
    """``PE[pos, 2i] = sin(pos / 10000^(2i/d))``, ``PE[pos, 2i+1] = cos(pos / 10000^(2i/d))``
    (interleaved), computed in float64 and rounded once to ``dtype``."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(-1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angles = pos / torch.pow(10000.0, two_i / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe.to(dtype=dtype, device=device)
