"""Causal multi-head attention of the book (SPEC §6.1 "MultiHeadAttention")."""

from jaxtyping import Float
from torch import Tensor, nn

from lmspec.reference.nn.attention import causal_attend, causal_bias
from lmspec.reference.nn.softmax import softmax


class MultiHeadAttention(nn.Module):
    """``out_proj(concat_h softmax(Q_h K_hᵀ / sqrt(d_h) + causal) V_h)``.

    ``W_query``/``W_key``/``W_value`` map ``d_in`` to ``d_out`` (with biases
    when ``qkv_bias``); head h owns the contiguous columns ``[h·d_h, (h+1)·d_h)``
    of their outputs, ``d_h = d_out / num_heads``. Dropout acts on the
    attention weights. No mask buffer is registered: the causal mask is made
    per call, so the state dict holds weights only.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        if num_heads <= 0 or d_out % num_heads != 0:
            raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads})")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, t: Float[Tensor, "*batch tokens d_out"]) -> Float[Tensor, "*batch heads tokens head_dim"]:
        return t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    def forward(self, x: Float[Tensor, "*batch tokens d_in"]) -> Float[Tensor, "*batch tokens d_out"]:
        tokens = x.shape[-2]
        if tokens > self.context_length:
            raise ValueError(f"{tokens} tokens exceed context_length {self.context_length}")
        q, k, v = (self._heads(proj(x)) for proj in (self.W_query, self.W_key, self.W_value))
        if self.training and self.dropout.p > 0:
            # dropout needs the weights themselves: the explicit softmax path
            scores = q @ k.transpose(-2, -1) / self.head_dim**0.5 + causal_bias(tokens, q.dtype, q.device)
            context = self.dropout(softmax(scores, dim=-1)) @ v
        else:
            context = causal_attend(q, k, v)
        return self.out_proj(context.transpose(-3, -2).flatten(-2))

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, context_length={self.context_length}"
