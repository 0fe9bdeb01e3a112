"""VARIANT: SPEC §2 written functionally with einsum everywhere and other op
orders than the reference: attention as ``(Q/√d_k) Kᵀ``, RMSNorm through
``rsqrt``, SiLU as ``x / (1 + e^{-x})``, RoPE tables built in float32 with an
outer product and gathered by position, embedding by ``index_select``.
Written apart from reference/nn; tokenizer and training come from the
reference adapter.
"""

import math

import torch
from einops import einsum, rearrange

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {
    "what": "einsum everywhere, (Q/sqrt(d))K^T, rsqrt RMSNorm, float32 RoPE tables",
    "run": ["2"],
}

_EPS = 1e-5


def run_linear(d_in, d_out, weights, in_features):
    return einsum(in_features, weights, "... i, o i -> ... o")


def run_embedding(vocab_size, d_model, weights, token_ids):
    flat = weights.index_select(0, token_ids.reshape(-1))
    return flat.reshape(*token_ids.shape, d_model)


def run_silu(in_features):
    return in_features / (1 + torch.exp(-in_features))


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    gate = run_silu(einsum(in_features, w1_weight, "... d, f d -> ... f"))
    up = einsum(in_features, w3_weight, "... d, f d -> ... f")
    return einsum(gate * up, w2_weight, "... f, d f -> ... d")


def run_silu_ffn(d_model, d_ff, w1_weight, w2_weight, in_features):
    hidden = run_silu(einsum(in_features, w1_weight, "... d, f d -> ... f"))
    return einsum(hidden, w2_weight, "... f, d f -> ... d")


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features.float()
    inv = torch.rsqrt(einsum(x, x, "... d, ... d -> ...") / d_model + eps)
    return (x * inv[..., None] * weights.float()).to(in_features.dtype)


def run_softmax(in_features, dim):
    shifted = in_features - in_features.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    device = in_query_or_key.device
    inv_freq = 1.0 / theta ** (torch.arange(0, d_k, 2, device=device, dtype=torch.float32) / d_k)
    angles = torch.outer(torch.arange(max_seq_len, device=device, dtype=torch.float32), inv_freq)
    cos, sin = angles.cos()[token_positions], angles.sin()[token_positions]  # (..., seq, d_k/2)
    pairs = rearrange(in_query_or_key, "... (k two) -> ... k two", two=2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return rearrange(out, "... k two -> ... (k two)").to(in_query_or_key.dtype)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = einsum(Q / math.sqrt(Q.shape[-1]), K, "... n d, ... m d -> ... n m")
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return einsum(run_softmax(scores, -1), V, "... n m, ... m d -> ... n d")


def _mha(num_heads, q_w, k_w, v_w, o_w, x, rope=None):
    seq = x.shape[-2]
    q, k, v = (
        rearrange(einsum(x, w, "... s d, o d -> ... s o"), "... s (h k) -> ... h s k", h=num_heads)
        for w in (q_w, k_w, v_w)
    )
    if rope is not None:
        q, k = rope(q), rope(k)
    causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
    heads = run_scaled_dot_product_attention(q, k, v, causal)
    return einsum(rearrange(heads, "... h s k -> ... s (h k)"), o_w, "... s i, o i -> ... s o")


def run_multihead_self_attention(
    d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features
):
    return _mha(num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features)


def _rope_for(d_k, theta, max_seq_len, seq, device, token_positions=None):
    if token_positions is None:
        token_positions = torch.arange(seq, device=device)
    positions = token_positions.unsqueeze(-2)  # broadcast over the heads axis
    return lambda t: run_rope(d_k, theta, max_seq_len, t, positions)


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
    rope = _rope_for(
        d_model // num_heads,
        theta,
        max_seq_len,
        in_features.shape[-2],
        in_features.device,
        token_positions,
    )
    return _mha(num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, rope)


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
    x = in_features
    rope = _rope_for(d_model // num_heads, theta, max_seq_len, x.shape[-2], x.device) if use_rope else None

    def attn(h):
        w = [weights[f"attn.{p}_proj.weight"] for p in ("q", "k", "v", "output")]
        return _mha(num_heads, *w, h, rope)

    def feed_forward(h):
        if ffn == "silu":
            return run_silu_ffn(d_model, d_ff, weights["ffn.w1.weight"], weights["ffn.w2.weight"], h)
        w = weights["ffn.w1.weight"], weights["ffn.w2.weight"], weights["ffn.w3.weight"]
        return run_swiglu(d_model, d_ff, *w, h)

    def ln(name, h):
        return run_rmsnorm(d_model, _EPS, weights[f"{name}.weight"], h)

    if norm == "pre":
        z = x + attn(ln("ln1", x))
        return z + feed_forward(ln("ln2", z))
    if norm == "post":
        z = ln("ln1", x + attn(x))
        return ln("ln2", z + feed_forward(z))
    z = x + attn(x)
    return z + feed_forward(z)


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
    h = run_embedding(vocab_size, d_model, weights["token_embeddings.weight"], in_indices)
    for i in range(num_layers):
        layer = {k.removeprefix(f"layers.{i}."): v for k, v in weights.items() if k.startswith(f"layers.{i}.")}
        h = run_transformer_block_ablation(
            d_model,
            num_heads,
            d_ff,
            context_length,
            rope_theta,
            layer,
            h,
            norm=norm,
            use_rope=use_rope,
            ffn=ffn,
        )
    if norm != "none":
        h = run_rmsnorm(d_model, _EPS, weights["ln_final.weight"], h)
    return run_linear(d_model, vocab_size, weights["lm_head.weight"], h)


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
    per_layer = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
    return 2 * vocab_size * d_model + num_layers * per_layer + d_model


def run_forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    n = context_length
    flops = {
        "attn_qkv": num_layers * 3 * 2 * n * d_model * d_model,
        "attn_scores": num_layers * 2 * n * n * d_model,
        "attn_values": num_layers * 2 * n * n * d_model,
        "attn_output": num_layers * 2 * n * d_model * d_model,
        "ffn": num_layers * 3 * 2 * n * d_model * d_ff,
        "lm_head": 2 * n * d_model * vocab_size,
    }
    flops["total"] = sum(flops.values())
    return flops
