"""Resource accounting for ``TransformerLM`` (SPEC §2 "Resource accounting").

All counts follow the modules in ``reference.nn`` exactly and are checked by
brute force in tests/reference/test_nn_reference.py: ``count_parameters``
against an instantiated model, ``forward_flops`` against torch's
``FlopCounterMode`` on a real forward pass.

FLOPs count matrix multiplies only, ``2·m·n·p`` for an ``(m×n)(n×p)`` product,
for one sequence of ``T`` tokens (``T = context_length`` unless given);
elementwise work (norms, softmax, SiLU, RoPE) is lower order and left out.
Per layer, with ``d = d_model``, ``f = d_ff``, ``V = vocab_size``:

    attn_qkv      3 · 2·T·d·d        Q, K, V projections
    attn_scores   2·T·T·d            Q Kᵀ over all heads (full T×T, the causal
                                      mask does not skip the upper triangle)
    attn_values   2·T·T·d            softmax(·) V over all heads
    attn_output   2·T·d·d            W_O
    ffn           3 · 2·T·d·f        SwiGLU (2 · 2·T·d·f for the SiLU ablation)
    lm_head       2·T·d·V            once, after the last layer

GPT-2 XL (vocab 50,257, context 1,024, 48 layers, d_model 1,600, 25 heads,
d_ff 6,400; SwiGLU, untied embeddings), as computed by this module:

    parameters    2,127,057,600  (≈ 2.13 B; embeddings and lm_head 80,411,200 each)
    forward FLOPs, one 1,024-token sequence (≈ 4.51 TFLOPs):
      attn_qkv      754,974,720,000   (16.7 %)
      attn_scores   161,061,273,600   ( 3.6 %)
      attn_values   161,061,273,600   ( 3.6 %)
      attn_output   251,658,240,000   ( 5.6 %)
      ffn         3,019,898,880,000   (66.9 %)
      lm_head       164,682,137,600   ( 3.6 %)
      total       4,513,336,524,800
    AdamW, float32, batch 1 (bytes): parameters 8,508,230,400, gradients
    8,508,230,400, optimizer state 17,016,460,800, activations 18,034,335,744
    (see ``activation_counts``), total 52,067,257,344 (≈ 52.1 GB).
"""

from lmspec.reference.nn.lm import ModelConfig

FLOP_KEYS: tuple[str, ...] = (
    "attn_qkv",
    "attn_scores",
    "attn_values",
    "attn_output",
    "ffn",
    "lm_head",
    "total",
)


def _ffn_matrices(config: ModelConfig) -> int:
    """How many ``d_model × d_ff`` matrices one FFN holds: 3 (SwiGLU) or 2 (SiLU)."""
    return 3 if config.ffn == "swiglu" else 2


def count_parameters(config: ModelConfig) -> int:
    """Trainable parameters: ``2·V·d + L·(4d² + k·d·f + 2d) + d`` (SPEC §2).

    ``k`` = 3 for SwiGLU, 2 for SiLU; the ``2d`` per layer and the final ``d``
    are the RMSNorm gains (absent with ``norm="none"``). Embeddings and
    ``lm_head`` are untied; RoPE has no parameters.
    """
    d, f, v = config.d_model, config.d_ff, config.vocab_size
    norm = 0 if config.norm == "none" else d
    per_layer = 4 * d * d + _ffn_matrices(config) * d * f + 2 * norm
    return 2 * v * d + config.num_layers * per_layer + norm


def forward_flops(config: ModelConfig, seq_len: int | None = None) -> dict[str, int]:
    """Matmul FLOPs of one forward pass over one sequence, per component, summed over layers.

    Keys ``FLOP_KEYS``; ``total`` is the sum of the others. See the module
    docstring for the formulas.
    """
    t = config.context_length if seq_len is None else seq_len
    if t <= 0:
        raise ValueError(f"seq_len ({t}) must be positive")
    d, f, v, n_layers = config.d_model, config.d_ff, config.vocab_size, config.num_layers
    flops = {
        "attn_qkv": n_layers * 3 * 2 * t * d * d,
        # per head 2·T·d_head·T; summed over heads d_head·h = d
        "attn_scores": n_layers * 2 * t * t * d,
        "attn_values": n_layers * 2 * t * t * d,
        "attn_output": n_layers * 2 * t * d * d,
        "ffn": n_layers * _ffn_matrices(config) * 2 * t * d * f,
        "lm_head": 2 * t * d * v,
    }
    flops["total"] = sum(flops.values())
    return flops


def activation_counts(config: ModelConfig, batch_size: int, seq_len: int | None = None) -> dict[str, int]:
    """Activation elements kept for the backward pass, per component (all layers summed).

    The enumeration of the CS336 handout's AdamW accounting, with ``N = B·T``
    tokens and ``h`` heads; one tensor per listed operation output:

        rmsnorm         L · 2·N·d   ln1, ln2 outputs (0 with norm="none")
        attn_qkv        L · 3·N·d   Q, K, V projections
        attn_scores     L · B·h·T²  Q Kᵀ
        attn_softmax    L · B·h·T²  attention weights
        attn_values     L · N·d     weighted sum of values
        attn_output     L · N·d     output projection
        ffn             L · (4·N·f + N·d) SwiGLU: W1 x, W3 x, SiLU(W1 x), the
                        product, W2 output; SiLU ablation: L · (2·N·f + N·d)
        final_rmsnorm   N·d          (0 with norm="none")
        lm_head         N·V          logits
        cross_entropy   N·V          softmax / log-probabilities

    Residual additions, embedding lookups and RoPE outputs are not counted
    (as in the handout); the total is a model, not a measurement.
    """
    t = config.context_length if seq_len is None else seq_len
    if batch_size <= 0 or t <= 0:
        raise ValueError(f"batch_size ({batch_size}) and seq_len ({t}) must be positive")
    d, f, v, n_layers = config.d_model, config.d_ff, config.vocab_size, config.num_layers
    n = batch_size * t
    norm = 0 if config.norm == "none" else 1
    ffn_per_layer = (4 * n * f if config.ffn == "swiglu" else 2 * n * f) + n * d
    return {
        "rmsnorm": n_layers * 2 * n * d * norm,
        "attn_qkv": n_layers * 3 * n * d,
        "attn_scores": n_layers * batch_size * config.num_heads * t * t,
        "attn_softmax": n_layers * batch_size * config.num_heads * t * t,
        "attn_values": n_layers * n * d,
        "attn_output": n_layers * n * d,
        "ffn": n_layers * ffn_per_layer,
        "final_rmsnorm": n * d * norm,
        "lm_head": n * v,
        "cross_entropy": n * v,
    }


def adamw_memory(
    config: ModelConfig, batch_size: int, seq_len: int | None = None, dtype_bytes: int = 4
) -> dict[str, int]:
    """Peak training memory in bytes with AdamW, decomposed (SPEC §2).

    ``parameters = P·b``, ``gradients = P·b``, ``optimizer_state = 2·P·b``
    (first and second moments; the scalar step counter is ignored),
    ``activations = sum(activation_counts(...))·b``, ``total`` their sum,
    for ``P = count_parameters(config)`` and ``b = dtype_bytes``.
    """
    if dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes ({dtype_bytes}) must be positive")
    n_params = count_parameters(config)
    memory = {
        "parameters": n_params * dtype_bytes,
        "gradients": n_params * dtype_bytes,
        "optimizer_state": 2 * n_params * dtype_bytes,
        "activations": sum(activation_counts(config, batch_size, seq_len).values()) * dtype_bytes,
    }
    memory["total"] = sum(memory.values())
    return memory
