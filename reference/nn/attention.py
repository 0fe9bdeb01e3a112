"""Scaled dot-product attention and causal multi-head self-attention (SPEC §2)."""

import math

import torch
from jaxtyping import Bool, Float, Integer
from torch import Tensor, nn

from lmspec.reference.nn.linear import Linear
from lmspec.reference.nn.rope import RotaryPositionalEmbedding

# Query rows per block in `causal_attend`. 64 keeps a block's (64 × keys)
# scores in cache for the lengths the spec's configs use; measured on 2 CPU
# cores at batch 8, 16 heads, seq 256, forward + backward: 30 ms per layer
# against 72 ms for one (seq × seq) block (BENCHMARKS.md, training step).
CAUSAL_BLOCK = 64


def scaled_dot_product_attention(
    Q: Float[Tensor, "... queries d_k"],
    K: Float[Tensor, "... keys d_k"],
    V: Float[Tensor, "... keys d_v"],
    mask: Bool[Tensor, "... queries keys"] | None = None,
) -> Float[Tensor, "... queries d_v"]:
    """``softmax(Q Kᵀ / sqrt(d_k), masked-out scores at −inf) V`` (SPEC §2).

    ``mask`` is True where a query may attend to a key and broadcasts over the
    leading axes. A query row with no allowed key gets all-zero weights and so
    a zero output (as torch's SDPA does), rather than NaN: see ``softmax``.
    """
    bias = None
    if mask is not None:
        bias = torch.full(mask.shape, -math.inf, dtype=Q.dtype, device=Q.device)
        bias.masked_fill_(mask, 0.0)
    return attend(Q, K, V, bias)


def causal_bias(seq: int, dtype: torch.dtype, device: torch.device | str | None = None) -> Float[Tensor, "seq seq"]:
    """Additive causal mask: 0 where key j ≤ query i, −inf above the diagonal."""
    return torch.full((seq, seq), -math.inf, dtype=dtype, device=device).triu_(1)


def attend(
    Q: Float[Tensor, "... queries d_k"],
    K: Float[Tensor, "... keys d_k"],
    V: Float[Tensor, "... keys d_v"],
    bias: Float[Tensor, "... queries keys"] | None = None,
) -> Float[Tensor, "... queries d_v"]:
    """``softmax(Q Kᵀ / sqrt(d_k) + bias) V`` with an additive mask (0 or −inf).

    An additive bias rather than ``masked_fill``: addition's backward is free.
    Computed as ``(E V) / rowsum(E)`` with ``E = exp(S − rowmax S)``, equal to
    ``softmax(S) V`` (see ``softmax``) but normalising the (queries × d_v)
    output instead of the (queries × keys) weights, as fused kernels do.
    """
    # scale Q rather than the scores: (queries × d_k) multiplies instead of
    # (queries × keys), the same product up to rounding
    scores = (Q * (1.0 / math.sqrt(Q.shape[-1]))) @ K.mT
    # in place on the fresh scores tensor from here on: no further
    # (queries × keys) buffers, and none of these ops needs its input saved
    if bias is not None:
        in_place = torch.broadcast_shapes(scores.shape, bias.shape) == scores.shape
        scores = scores.add_(bias) if in_place else scores + bias
    finfo = torch.finfo(scores.dtype)
    # as in softmax: detached shift (zero gradient), clamped so that rows that
    # are all −inf give exp(−inf) = 0 instead of NaN
    shift = scores.amax(dim=-1, keepdim=True).detach().clamp_min(finfo.min)
    weights = scores.sub_(shift).exp_()
    # rows with an allowed key sum to ≥ 1 (their max gives exp(0)); empty rows
    # sum to 0 and become 0 / tiny = 0
    return (weights @ V) / weights.sum(dim=-1, keepdim=True).clamp_min(finfo.tiny)


def causal_attend(
    Q: Float[Tensor, "... seq d_k"],
    K: Float[Tensor, "... seq d_k"],
    V: Float[Tensor, "... seq d_v"],
    block: int = CAUSAL_BLOCK,
) -> Float[Tensor, "... seq d_v"]:
    """``attend`` with the causal mask (query i sees keys j ≤ i), by blocks of query rows.

    Query rows ``[s, e)`` see only keys ``[0, e)``, so each block attends to
    that prefix alone: the same result as one masked (seq × seq) product, with
    the fully masked upper-right blocks never computed (about half the work at
    long lengths) and each block's scores small enough to stay in cache.
    """
    seq = Q.shape[-2]
    bias = causal_bias(seq, Q.dtype, Q.device)
    if seq <= block:
        return attend(Q, K, V, bias)
    outputs = []
    for start in range(0, seq, block):
        end = min(start + block, seq)
        outputs.append(attend(Q[..., start:end, :], K[..., :end, :], V[..., :end, :], bias[start:end, :end]))
    return torch.cat(outputs, dim=-2)


class CausalMultiHeadSelfAttention(nn.Module):
    """``W_O concat_h(SDPA(RoPE(Q_h), RoPE(K_h), V_h, causal))`` with ``Q = x W_Qᵀ`` etc. (SPEC §2).

    ``d_k = d_v = d_model / num_heads``; rows of ``q_proj``/``k_proj``/``v_proj``
    are grouped head by head. ``rope`` (optional, shared between layers by
    ``TransformerLM``) rotates Q and K identically for every head; without it
    this is NoPE attention. Position i attends to positions j ≤ i only.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        rope: RotaryPositionalEmbedding | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if d_model <= 0 or num_heads <= 0:
            raise ValueError(f"d_model ({d_model}) and num_heads ({num_heads}) must be positive")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        if rope is not None and rope.d_k != self.d_head:
            raise ValueError(
                f"rope.d_k ({rope.d_k}) must equal the head dimension d_model / num_heads "
                f"({d_model} / {num_heads} = {self.d_head})"
            )
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = rope

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Integer[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        """``token_positions`` (default ``0 .. seq-1``) broadcast against ``x``'s
        leading axes and are used only with RoPE."""
        q, k, v = (self._split_heads(proj(x)) for proj in (self.q_proj, self.k_proj, self.v_proj))
        if self.rope is not None:
            # the same rotation for every head: positions get a broadcast head axis
            positions = None if token_positions is None else token_positions.unsqueeze(-2)
            q = self.rope(q, positions)
            k = self.rope(k, positions)
        heads = causal_attend(q, k, v)  # (..., h, seq, d_head)
        return self.output_proj(heads.transpose(-3, -2).flatten(-2))

    def _split_heads(self, x: Float[Tensor, "... seq d_model"]) -> Float[Tensor, "... h seq d_head"]:
        # (..., seq, h·d_head) -> (..., h, seq, d_head): head 0 owns the first rows of W
        return x.unflatten(-1, (self.num_heads, self.d_head)).transpose(-3, -2)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}"
