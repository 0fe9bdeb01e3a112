"""VARIANT: SPEC §2 as Modules with one concatenated QKV weight
``(3·d_model, d_model)`` (one matmul, then split), RoPE as complex
multiplication with float64-built tables, attention as ``(Q Kᵀ)·(1/√d_k)``,
RMSNorm dividing by ``sqrt``, softmax normalised by a reciprocal multiply.
Written apart from reference/nn; tokenizer and training come from the
reference adapter. Parameters are counted by instantiating the model.
"""

import math

import torch
from torch import Tensor
from torch.nn import Module, ModuleList, Parameter

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {"what": "fused QKV projection, complex RoPE, Module model", "run": ["2"]}


def run_softmax(in_features, dim):
    e = torch.exp(in_features - in_features.max(dim=dim, keepdim=True).values)
    return e * e.sum(dim=dim, keepdim=True).reciprocal()


def run_silu(in_features):
    return in_features * torch.sigmoid(in_features)


def run_linear(d_in, d_out, weights, in_features):
    return in_features.matmul(weights.transpose(0, 1))


def run_embedding(vocab_size, d_model, weights, token_ids):
    return weights[token_ids]


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features.to(torch.float32)
    rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (weights.to(torch.float32) * (x / rms)).to(in_features.dtype)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    # gate and up projections fused into one matmul too
    gate, up = in_features.matmul(torch.cat([w1_weight, w3_weight]).T).split(w1_weight.shape[0], dim=-1)
    return (run_silu(gate) * up).matmul(w2_weight.T)


def run_silu_ffn(d_model, d_ff, w1_weight, w2_weight, in_features):
    return run_silu(in_features.matmul(w1_weight.T)).matmul(w2_weight.T)


class Rope(Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        k = torch.arange(d_k // 2, dtype=torch.float64)
        angles = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * theta ** (-2 * k / d_k)
        self.register_buffer(
            "phase",
            torch.polar(torch.ones_like(angles), angles).to(device, torch.complex64),
            persistent=False,
        )

    def forward(self, x: Tensor, token_positions: Tensor) -> Tensor:
        z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(z * self.phase[token_positions]).flatten(-2).to(x.dtype)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    return Rope(theta, d_k, max_seq_len, in_query_or_key.device)(in_query_or_key, token_positions)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q.matmul(K.transpose(-1, -2)) * (1.0 / math.sqrt(Q.shape[-1]))
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    return run_softmax(scores, -1).matmul(V)


class FusedAttention(Module):
    def __init__(self, d_model, num_heads, rope=None, device=None):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = Parameter(torch.empty(3 * d_model, d_model, device=device))
        self.out = Parameter(torch.empty(d_model, d_model, device=device))
        self.rope = rope

    def load(self, q, k, v, o):
        with torch.no_grad():
            self.qkv.copy_(torch.cat([q, k, v]))
            self.out.copy_(o)
        return self

    def forward(self, x, token_positions=None):
        *lead, seq, d_model = x.shape
        q, k, v = x.matmul(self.qkv.T).chunk(3, dim=-1)
        q, k, v = (t.reshape(*lead, seq, self.num_heads, -1).transpose(-2, -3) for t in (q, k, v))
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(seq, device=x.device)
            q = self.rope(q, token_positions[..., None, :])
            k = self.rope(k, token_positions[..., None, :])
        causal = torch.arange(seq, device=x.device)[:, None] >= torch.arange(seq, device=x.device)
        heads = run_scaled_dot_product_attention(q, k, v, causal)
        return heads.transpose(-2, -3).reshape(*lead, seq, d_model).matmul(self.out.T)


def run_multihead_self_attention(
    d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features
):
    attn = FusedAttention(d_model, num_heads, device=in_features.device)
    return attn.load(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)(in_features)


def run_multihead_self_attention_with_rope(
    d_model,
    num_heads,
    max_seq_len,
    theta,
    q_proj_weight,
    k_proj_weight,
    v_proj_weight,
    o_proj_weight,
    in_features,
    token_positions=None,
):
    rope = Rope(theta, d_model // num_heads, max_seq_len, in_features.device)
    attn = FusedAttention(d_model, num_heads, rope, device=in_features.device)
    return attn.load(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)(in_features, token_positions)


class Norm(Module):
    def __init__(self, d_model, device=None):
        super().__init__()
        self.weight = Parameter(torch.ones(d_model, device=device))

    def forward(self, x):
        return run_rmsnorm(x.shape[-1], 1e-5, self.weight, x)


class Block(Module):
    def __init__(
        self,
        d_model,
        num_heads,
        d_ff,
        max_seq_len,
        theta,
        norm="pre",
        use_rope=True,
        ffn="swiglu",
        device=None,
    ):
        super().__init__()
        rope = Rope(theta, d_model // num_heads, max_seq_len, device) if use_rope else None
        self.attn = FusedAttention(d_model, num_heads, rope, device)
        self.norm, self.ffn_kind = norm, ffn
        if norm != "none":
            self.ln1, self.ln2 = Norm(d_model, device), Norm(d_model, device)
        self.w1 = Parameter(torch.empty(d_ff, d_model, device=device))
        self.w2 = Parameter(torch.empty(d_model, d_ff, device=device))
        if ffn == "swiglu":
            self.w3 = Parameter(torch.empty(d_ff, d_model, device=device))

    def load(self, weights):
        w = {k: v for k, v in weights.items()}
        self.attn.load(*(w[f"attn.{p}_proj.weight"] for p in ("q", "k", "v", "output")))
        with torch.no_grad():
            if self.norm != "none":
                self.ln1.weight.copy_(w["ln1.weight"])
                self.ln2.weight.copy_(w["ln2.weight"])
            self.w1.copy_(w["ffn.w1.weight"])
            self.w2.copy_(w["ffn.w2.weight"])
            if self.ffn_kind == "swiglu":
                self.w3.copy_(w["ffn.w3.weight"])
        return self

    def feed_forward(self, h):
        if self.ffn_kind == "silu":
            return run_silu_ffn(0, 0, self.w1, self.w2, h)
        return run_swiglu(0, 0, self.w1, self.w2, self.w3, h)

    def forward(self, x):
        if self.norm == "pre":
            z = x + self.attn(self.ln1(x))
            return z + self.feed_forward(self.ln2(z))
        if self.norm == "post":
            z = self.ln1(x + self.attn(x))
            return self.ln2(z + self.feed_forward(z))
        z = x + self.attn(x)
        return z + self.feed_forward(z)


class LM(Module):
    def __init__(
        self,
        vocab_size,
        context_length,
        d_model,
        num_layers,
        num_heads,
        d_ff,
        rope_theta,
        device=None,
        **ablation,
    ):
        super().__init__()
        self.embed = Parameter(torch.empty(vocab_size, d_model, device=device))
        self.blocks = ModuleList(
            Block(d_model, num_heads, d_ff, context_length, rope_theta, device=device, **ablation)
            for _ in range(num_layers)
        )
        self.final = Norm(d_model, device) if ablation.get("norm", "pre") != "none" else None
        self.head = Parameter(torch.empty(vocab_size, d_model, device=device))

    def load(self, weights):
        with torch.no_grad():
            self.embed.copy_(weights["token_embeddings.weight"])
            self.head.copy_(weights["lm_head.weight"])
            if self.final is not None:
                self.final.weight.copy_(weights["ln_final.weight"])
        for i, blk in enumerate(self.blocks):
            blk.load({k.removeprefix(f"layers.{i}."): v for k, v in weights.items() if k.startswith(f"layers.{i}.")})
        return self

    def forward(self, ids):
        h = self.embed[ids]
        for blk in self.blocks:
            h = blk(h)
        if self.final is not None:
            h = self.final(h)
        return h.matmul(self.head.T)


def run_transformer_block_ablation(
    d_model,
    num_heads,
    d_ff,
    max_seq_len,
    theta,
    weights,
    in_features,
    *,
    norm="pre",
    use_rope=True,
    ffn="swiglu",
):
    blk = Block(d_model, num_heads, d_ff, max_seq_len, theta, norm, use_rope, ffn, device=in_features.device)
    return blk.load(weights)(in_features)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    return run_transformer_block_ablation(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features)


def run_transformer_lm_ablation(
    vocab_size,
    context_length,
    d_model,
    num_layers,
    num_heads,
    d_ff,
    rope_theta,
    weights,
    in_indices,
    *,
    norm="pre",
    use_rope=True,
    ffn="swiglu",
):
    model = LM(
        vocab_size,
        context_length,
        d_model,
        num_layers,
        num_heads,
        d_ff,
        rope_theta,
        device=in_indices.device,
        norm=norm,
        use_rope=use_rope,
        ffn=ffn,
    )
    return model.load(weights)(in_indices)


def run_transformer_lm(
    vocab_size,
    context_length,
    d_model,
    num_layers,
    num_heads,
    d_ff,
    rope_theta,
    weights,
    in_indices,
):
    return run_transformer_lm_ablation(
        vocab_size,
        context_length,
        d_model,
        num_layers,
        num_heads,
        d_ff,
        rope_theta,
        weights,
        in_indices,
    )


def run_count_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    model = LM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, 10000.0, device="meta")
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run_forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    n, d, L = context_length, d_model, num_layers
    per_layer = {
        "attn_qkv": 2 * n * d * (3 * d),  # one fused (n×d)(d×3d) product
        "attn_scores": num_heads * 2 * n * (d // num_heads) * n,
        "attn_values": num_heads * 2 * n * n * (d // num_heads),
        "attn_output": 2 * n * d * d,
        "ffn": 2 * n * d * (2 * d_ff) + 2 * n * d_ff * d,
    }
    flops = {k: L * v for k, v in per_layer.items()}
    flops["lm_head"] = 2 * n * d * vocab_size
    flops["total"] = sum(flops.values())
    return flops
