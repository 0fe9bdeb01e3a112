"""One Transformer block and its ablations (SPEC §2 "Pre-norm block")."""

import torch
from jaxtyping import Float, Integer
from torch import Tensor, nn

from lmspec.reference.model_config import FFN_KINDS, NORM_POSITIONS, check_choice
from lmspec.reference.nn.attention import CausalMultiHeadSelfAttention
from lmspec.reference.nn.ffn import SiLUFFN, SwiGLU
from lmspec.reference.nn.rmsnorm import RMSNorm
from lmspec.reference.nn.rope import RotaryPositionalEmbedding


class TransformerBlock(nn.Module):
    """Pre-norm: ``z = x + MHA(RMSNorm₁(x))``, ``y = z + FFN(RMSNorm₂(z))`` (SPEC §2).

    Ablations (SPEC §2): ``norm="post"``: ``z = RMSNorm₁(x + MHA(x))``,
    ``y = RMSNorm₂(z + FFN(z))``; ``norm="none"``: no RMSNorm (no ``ln1``/``ln2``
    weights); ``rope=None``: NoPE; ``ffn="silu"``: ``W2 SiLU(W1 x)``.
    Submodules ``ln1``, ``attn``, ``ln2``, ``ffn`` give the CS336 state-dict keys.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        rope: RotaryPositionalEmbedding | None = None,
        *,
        norm: str = "pre",
        ffn: str = "swiglu",
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        check_choice("norm", norm, NORM_POSITIONS)
        check_choice("ffn", ffn, FFN_KINDS)
        self.norm = norm
        factory = {"device": device, "dtype": dtype}
        self.ln1 = None if norm == "none" else RMSNorm(d_model, eps, **factory)
        self.attn = CausalMultiHeadSelfAttention(d_model, num_heads, rope, **factory)
        self.ln2 = None if norm == "none" else RMSNorm(d_model, eps, **factory)
        ffn_cls = SwiGLU if ffn == "swiglu" else SiLUFFN
        self.ffn = ffn_cls(d_model, d_ff, **factory)

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Integer[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        if self.ln1 is None or self.ln2 is None:  # norm == "none"
            z = x + self.attn(x, token_positions)
            return z + self.ffn(z)
        if self.norm == "post":
            z = self.ln1(x + self.attn(x, token_positions))
            return self.ln2(z + self.ffn(z))
        z = x + self.attn(self.ln1(x), token_positions)
        return z + self.ffn(self.ln2(z))

    def extra_repr(self) -> str:
        return f"norm={self.norm!r}"
