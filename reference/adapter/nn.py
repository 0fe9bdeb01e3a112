"""The reference Transformer LM exposed through the adapter interface (SPEC §5).

Core profile: the CS336 2025 ``tests/adapters.py`` functions for SPEC §2, same
names, parameter names and order. Extended profile: the SiLU FFN, the block
and LM ablations and the accounting functions (docs/CONTRIBUTING-suite.md).

Each function builds the module on the device and dtype of the weights it is
given, loads them strictly (``load_weights``: a wrong key or shape is a
ValueError listing every problem) and runs it. Two deliberate departures from
the CS336 annotations, both wider: any number of leading batch axes for the
block and the LM (SPEC §2: "any number of them must work"), and RoPE ``theta``
may be an int (beartype, unlike PEP 484, does not let int stand for float).
"""

import torch
from jaxtyping import Bool, Float, Integer
from torch import Tensor

from lmspec.reference.accounting import count_parameters, forward_flops
from lmspec.reference.nn import (
    CausalMultiHeadSelfAttention,
    Embedding,
    Linear,
    ModelConfig,
    RMSNorm,
    RotaryPositionalEmbedding,
    SiLUFFN,
    SwiGLU,
    TransformerBlock,
    TransformerLM,
    load_weights,
    scaled_dot_product_attention,
    silu,
    softmax,
)

__all__ = [
    "run_count_parameters",
    "run_embedding",
    "run_forward_flops",
    "run_linear",
    "run_multihead_self_attention",
    "run_multihead_self_attention_with_rope",
    "run_rmsnorm",
    "run_rope",
    "run_scaled_dot_product_attention",
    "run_silu",
    "run_silu_ffn",
    "run_softmax",
    "run_swiglu",
    "run_transformer_block",
    "run_transformer_block_ablation",
    "run_transformer_lm",
    "run_transformer_lm_ablation",
]


def _factory(weights: dict[str, Tensor]) -> dict[str, torch.device | torch.dtype]:
    """device/dtype keyword arguments matching the given weights."""
    first = next(iter(weights.values()))
    return {"device": first.device, "dtype": first.dtype}


def run_linear(
    d_in: int,
    d_out: int,
    weights: Float[Tensor, " d_out d_in"],
    in_features: Float[Tensor, " ... d_in"],
) -> Float[Tensor, " ... d_out"]:
    layer = Linear(d_in, d_out, device=weights.device, dtype=weights.dtype)
    load_weights(layer, {"weight": weights})
    return layer(in_features)


def run_embedding(
    vocab_size: int,
    d_model: int,
    weights: Float[Tensor, " vocab_size d_model"],
    token_ids: Integer[Tensor, " ..."],
) -> Float[Tensor, " ... d_model"]:
    layer = Embedding(vocab_size, d_model, device=weights.device, dtype=weights.dtype)
    load_weights(layer, {"weight": weights})
    return layer(token_ids)


def run_swiglu(
    d_model: int,
    d_ff: int,
    w1_weight: Float[Tensor, " d_ff d_model"],
    w2_weight: Float[Tensor, " d_model d_ff"],
    w3_weight: Float[Tensor, " d_ff d_model"],
    in_features: Float[Tensor, " ... d_model"],
) -> Float[Tensor, " ... d_model"]:
    weights = {"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight}
    ffn = SwiGLU(d_model, d_ff, **_factory(weights))
    load_weights(ffn, weights)
    return ffn(in_features)


def run_scaled_dot_product_attention(
    Q: Float[Tensor, " ... queries d_k"],
    K: Float[Tensor, " ... keys d_k"],
    V: Float[Tensor, " ... keys d_v"],
    mask: Bool[Tensor, " ... queries keys"] | None = None,
) -> Float[Tensor, " ... queries d_v"]:
    return scaled_dot_product_attention(Q, K, V, mask)


def _attention_weights(
    q_proj_weight: Tensor, k_proj_weight: Tensor, v_proj_weight: Tensor, o_proj_weight: Tensor
) -> dict[str, Tensor]:
    return {
        "q_proj.weight": q_proj_weight,
        "k_proj.weight": k_proj_weight,
        "v_proj.weight": v_proj_weight,
        "output_proj.weight": o_proj_weight,
    }


def run_multihead_self_attention(
    d_model: int,
    num_heads: int,
    q_proj_weight: Float[Tensor, " d_model d_model"],
    k_proj_weight: Float[Tensor, " d_model d_model"],
    v_proj_weight: Float[Tensor, " d_model d_model"],
    o_proj_weight: Float[Tensor, " d_model d_model"],
    in_features: Float[Tensor, " ... sequence_length d_model"],
) -> Float[Tensor, " ... sequence_length d_model"]:
    weights = _attention_weights(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    attn = CausalMultiHeadSelfAttention(d_model, num_heads, **_factory(weights))
    load_weights(attn, weights)
    return attn(in_features)


def run_multihead_self_attention_with_rope(
    d_model: int,
    num_heads: int,
    max_seq_len: int,
    theta: float | int,
    q_proj_weight: Float[Tensor, " d_model d_model"],
    k_proj_weight: Float[Tensor, " d_model d_model"],
    v_proj_weight: Float[Tensor, " d_model d_model"],
    o_proj_weight: Float[Tensor, " d_model d_model"],
    in_features: Float[Tensor, " ... sequence_length d_model"],
    token_positions: Integer[Tensor, " ... sequence_length"] | None = None,
) -> Float[Tensor, " ... sequence_length d_model"]:
    weights = _attention_weights(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    if d_model % num_heads != 0:  # checked here too so the message is not about RoPE's d_k
        raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
    rope = RotaryPositionalEmbedding(float(theta), d_model // num_heads, max_seq_len, device=q_proj_weight.device)
    attn = CausalMultiHeadSelfAttention(d_model, num_heads, rope, **_factory(weights))
    load_weights(attn, weights)
    return attn(in_features, token_positions)


def run_rope(
    d_k: int,
    theta: float | int,
    max_seq_len: int,
    in_query_or_key: Float[Tensor, " ... sequence_length d_k"],
    token_positions: Integer[Tensor, " ... sequence_length"],
) -> Float[Tensor, " ... sequence_length d_k"]:
    rope = RotaryPositionalEmbedding(float(theta), d_k, max_seq_len, device=in_query_or_key.device)
    return rope(in_query_or_key, token_positions)


def _block(
    d_model: int,
    num_heads: int,
    d_ff: int,
    max_seq_len: int,
    theta: float | int,
    weights: dict[str, Tensor],
    *,
    norm: str,
    use_rope: bool,
    ffn: str,
) -> TransformerBlock:
    factory = _factory(weights)
    if d_model % num_heads != 0:
        raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
    rope = (
        RotaryPositionalEmbedding(float(theta), d_model // num_heads, max_seq_len, device=factory["device"])
        if use_rope
        else None
    )
    block = TransformerBlock(d_model, num_heads, d_ff, rope, norm=norm, ffn=ffn, **factory)
    load_weights(block, weights)
    return block


def run_transformer_block(
    d_model: int,
    num_heads: int,
    d_ff: int,
    max_seq_len: int,
    theta: float | int,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... sequence_length d_model"],
) -> Float[Tensor, " ... sequence_length d_model"]:
    block = _block(
        d_model,
        num_heads,
        d_ff,
        max_seq_len,
        theta,
        weights,
        norm="pre",
        use_rope=True,
        ffn="swiglu",
    )
    return block(in_features)


def run_transformer_lm(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
    rope_theta: float | int,
    weights: dict[str, Tensor],
    in_indices: Integer[Tensor, " ... sequence_length"],
) -> Float[Tensor, " ... sequence_length vocab_size"]:
    config = ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, float(rope_theta))
    model = TransformerLM(config, **_factory(weights))
    load_weights(model, weights)
    return model(in_indices)


def run_rmsnorm(
    d_model: int,
    eps: float,
    weights: Float[Tensor, " d_model"],
    in_features: Float[Tensor, " ... d_model"],
) -> Float[Tensor, " ... d_model"]:
    norm = RMSNorm(d_model, eps, device=weights.device, dtype=weights.dtype)
    load_weights(norm, {"weight": weights})
    return norm(in_features)


def run_silu(in_features: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    return silu(in_features)


def run_softmax(in_features: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    return softmax(in_features, dim)


# --- extended profile ---------------------------------------------------------


def run_silu_ffn(
    d_model: int,
    d_ff: int,
    w1_weight: Float[Tensor, " d_ff d_model"],
    w2_weight: Float[Tensor, " d_model d_ff"],
    in_features: Float[Tensor, " ... d_model"],
) -> Float[Tensor, " ... d_model"]:
    weights = {"w1.weight": w1_weight, "w2.weight": w2_weight}
    ffn = SiLUFFN(d_model, d_ff, **_factory(weights))
    load_weights(ffn, weights)
    return ffn(in_features)


def run_transformer_block_ablation(
    d_model: int,
    num_heads: int,
    d_ff: int,
    max_seq_len: int,
    theta: float | int,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... sequence_length d_model"],
    *,
    norm: str = "pre",
    use_rope: bool = True,
    ffn: str = "swiglu",
) -> Float[Tensor, " ... sequence_length d_model"]:
    block = _block(d_model, num_heads, d_ff, max_seq_len, theta, weights, norm=norm, use_rope=use_rope, ffn=ffn)
    return block(in_features)


def run_transformer_lm_ablation(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
    rope_theta: float | int,
    weights: dict[str, Tensor],
    in_indices: Integer[Tensor, " ... sequence_length"],
    *,
    norm: str = "pre",
    use_rope: bool = True,
    ffn: str = "swiglu",
) -> Float[Tensor, " ... sequence_length vocab_size"]:
    config = ModelConfig(
        vocab_size,
        context_length,
        d_model,
        num_layers,
        num_heads,
        d_ff,
        float(rope_theta),
        norm=norm,
        use_rope=use_rope,
        ffn=ffn,
    )
    model = TransformerLM(config, **_factory(weights))
    load_weights(model, weights)
    return model(in_indices)


def run_count_parameters(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
) -> int:
    config = ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff)
    return count_parameters(config)


def run_forward_flops(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
) -> dict[str, int]:
    config = ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff)
    return forward_flops(config)
