"""The reference TransformerLM rebuilt from torch's own building blocks, as a speed baseline.

Same architecture and math as ``reference.nn.TransformerLM`` (SPEC §2, pre-norm,
SwiGLU, interleaved-pair RoPE, no biases, untied embeddings), written the way
an engineer who may use all of torch would: ``nn.Linear(bias=False)``,
``nn.Embedding``, ``F.rms_norm``, ``F.silu``, ``F.scaled_dot_product_attention(
is_causal=True)``, ``F.cross_entropy`` and ``torch.optim.AdamW``. Submodule
names give the same state-dict keys as the reference, so
``native.load_state_dict(reference.state_dict())`` makes the two compute the
same function (``check_equivalence`` verifies that before a benchmark run).

This is the "what users would otherwise pick" baseline of BENCHMARKS.md, not
a from-scratch implementation (SPEC §0 does not apply to tools/).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["NativeLM", "check_equivalence", "native_loss"]


class _RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        # upcast as the spec requires; a no-op for float32 inputs
        return F.rms_norm(x.float(), (x.shape[-1],), self.weight.float(), self.eps).to(x.dtype)


class _Rope(nn.Module):
    """Interleaved pairs (2k, 2k+1), angle ``i / theta^(2k/d)``: the reference's math."""

    def __init__(self, theta: float, d_head: int, max_seq: int) -> None:
        super().__init__()
        inv = theta ** -(torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
        angles = torch.arange(max_seq, dtype=torch.float64)[:, None] * inv  # (seq, d/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        seq = x.shape[-2]
        cos, sin = self.cos[:seq], self.sin[:seq]
        x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)


class _Attention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, rope: _Rope) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        self.rope = rope

    def forward(self, x: Tensor) -> Tensor:
        def heads(t: Tensor) -> Tensor:
            return t.unflatten(-1, (self.num_heads, -1)).transpose(-3, -2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        q, k = self.rope(q), self.rope(k)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


class _SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class _Block(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, rope: _Rope, eps: float) -> None:
        super().__init__()
        self.ln1 = _RMSNorm(d_model, eps)
        self.attn = _Attention(d_model, num_heads, rope)
        self.ln2 = _RMSNorm(d_model, eps)
        self.ffn = _SwiGLU(d_model, d_ff)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class NativeLM(nn.Module):
    """Pre-norm SwiGLU RoPE decoder with the reference's state-dict keys."""

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        rope_theta: float = 10000.0,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        rope = _Rope(rope_theta, d_model // num_heads, context_length)
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(_Block(d_model, num_heads, d_ff, rope, eps) for _ in range(num_layers))
        self.ln_final = _RMSNorm(d_model, eps)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                std = math.sqrt(2.0 / (module.in_features + module.out_features))
                nn.init.trunc_normal_(module.weight, std=std, a=-3 * std, b=3 * std)
            elif isinstance(module, nn.Embedding):
                nn.init.trunc_normal_(module.weight, std=1.0, a=-3.0, b=3.0)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.token_embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def native_loss(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.flatten(0, -2).float(), targets.flatten())


def check_equivalence(reference_model: nn.Module, native: NativeLM, ids: Tensor) -> float:
    """Load the reference's weights into ``native``; return max |logit difference|."""
    missing = native.load_state_dict(reference_model.state_dict(), strict=True)
    del missing
    with torch.no_grad():
        return float((reference_model(ids) - native(ids)).abs().max())
