"""VARIANT: a student who wrote every layer for exactly the shapes the CS336
contract names, with einops patterns spelled out per rank: ``b s d`` for
Linear, RMSNorm, SwiGLU, MHA and the block, ``b s`` ids for the embedding and
the LM, ``b n d`` / ``b h n d`` for attention and RoPE, ``b v`` / ``b s v``
for cross-entropy. Any other rank raises a ValueError. Matrix products are
``@``, RoPE tables are float32 and built once per call from ``max_seq_len``,
heads are split with ``rearrange``. Correct on the contract: every MUST test
passes; the STRICT shape tests (other ranks) fail, as they should.
Written apart from reference/; tokenizer, optimizer and data come from the
reference adapter.
"""

import math

import torch
from einops import einsum, rearrange

from lmspec.reference.adapter import *  # noqa: F403

VARIANT = {
    "what": "3-D-only einops code (b s d patterns) for every layer and cross-entropy",
    "run": ["2", "3.cross_entropy"],
}


def _rank(name, t, *ranks):
    if t.dim() not in ranks:
        raise ValueError(f"{name} must have {' or '.join(map(str, ranks))} dims, got shape {tuple(t.shape)}")


# --- single layers ----------------------------------------------------------------
def run_linear(d_in, d_out, weights, in_features):
    _rank("in_features (b s d_in)", in_features, 3)
    return einsum(in_features, weights, "b s i, o i -> b s o")


def run_embedding(vocab_size, d_model, weights, token_ids):
    _rank("token_ids (b s)", token_ids, 2)
    b, s = token_ids.shape
    rows = weights[rearrange(token_ids, "b s -> (b s)")]
    return rearrange(rows, "(b s) d -> b s d", b=b, s=s)


def run_rmsnorm(d_model, eps, weights, in_features):
    _rank("in_features (b s d)", in_features, 3)
    in_dtype = in_features.dtype
    x = in_features.to(torch.float32)
    mean_square = einsum(x * x, "b s d -> b s") / d_model
    inv_rms = 1.0 / torch.sqrt(mean_square + eps)
    result = x * rearrange(inv_rms, "b s -> b s 1") * weights
    return result.to(in_dtype)


def run_silu(in_features):
    # the official test passes (rows, d); inside SwiGLU it is (b, s, d_ff)
    _rank("in_features", in_features, 2, 3)
    return in_features * torch.sigmoid(in_features)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    _rank("in_features (b s d_model)", in_features, 3)
    gate = run_silu(einsum(in_features, w1_weight, "b s d, f d -> b s f"))
    up = einsum(in_features, w3_weight, "b s d, f d -> b s f")
    return einsum(gate * up, w2_weight, "b s f, d f -> b s d")


def run_softmax(in_features, dim):
    # the contract: any shape, any dim
    biggest = in_features.max(dim=dim, keepdim=True).values
    e = torch.exp(in_features - biggest)
    return e / e.sum(dim=dim, keepdim=True)


# --- RoPE ------------------------------------------------------------------------------
def _rope_tables(d_k, theta, max_seq_len, device):
    pair = torch.arange(d_k // 2, device=device, dtype=torch.float32)
    inv_freq = theta ** (-2.0 * pair / d_k)
    angles = einsum(torch.arange(max_seq_len, device=device, dtype=torch.float32), inv_freq, "i, k -> i k")
    return torch.cos(angles), torch.sin(angles)  # (max_seq_len, d_k/2)


def _rotate(x, cos, sin):
    """x (..., s, d_k) with cos, sin already shaped to broadcast as (..., s, d_k/2)."""
    pairs = rearrange(x, "... s (k two) -> ... s k two", two=2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rearrange(rotated, "... s k two -> ... s (k two)")


def _positions_bs(token_positions):
    """(s,), (1, s) or (b, s) positions as (1 or b, s)."""
    _rank("token_positions (s) or (b s)", token_positions, 1, 2)
    return token_positions if token_positions.dim() == 2 else rearrange(token_positions, "s -> 1 s")


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    x = in_query_or_key
    _rank("in_query_or_key (b s d_k) or (b h s d_k)", x, 3, 4)
    cos, sin = _rope_tables(d_k, theta, max_seq_len, x.device)
    pos = _positions_bs(token_positions)
    cos, sin = cos[pos], sin[pos]  # (1 or b, s, d_k/2)
    if x.dim() == 4:
        if pos.shape[0] != 1:
            raise ValueError("a (b h s d_k) input takes positions (s) or (1 s)")
        cos, sin = rearrange(cos, "b s k -> b 1 s k"), rearrange(sin, "b s k -> b 1 s k")
    return _rotate(x, cos, sin).to(x.dtype)


# --- attention -------------------------------------------------------------------------
def run_scaled_dot_product_attention(Q, K, V, mask=None):
    _rank("Q (b n d) or (b h n d)", Q, 3, 4)
    pattern = "b n d, b m d -> b n m" if Q.dim() == 3 else "b h n d, b h m d -> b h n m"
    scores = einsum(Q, K, pattern) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = run_softmax(scores, dim=-1)
    return weights @ V


def _attention(d_model, num_heads, q_w, k_w, v_w, o_w, x, rope=None):
    _rank("in_features (b s d_model)", x, 3)
    s = x.shape[1]
    q, k, v = (rearrange(x @ w.T, "b s (h d) -> b h s d", h=num_heads) for w in (q_w, k_w, v_w))
    if rope is not None:
        q, k = rope(q), rope(k)
    causal = torch.tril(torch.ones(s, s, dtype=torch.bool, device=x.device))
    heads = run_scaled_dot_product_attention(q, k, v, causal)
    return rearrange(heads, "b h s d -> b s (h d)") @ o_w.T


def _rope_for_heads(d_k, theta, max_seq_len, token_positions):
    """RoPE on (b h s d_k) with (1, s) or (b, s) positions, the same for every head."""

    def rope(t):
        cos, sin = _rope_tables(d_k, theta, max_seq_len, t.device)
        pos = _positions_bs(token_positions)
        cos = rearrange(cos[pos], "b s k -> b 1 s k")
        sin = rearrange(sin[pos], "b s k -> b 1 s k")
        return _rotate(t, cos, sin)

    return rope


def run_multihead_self_attention(
    d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features
):
    return _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features)


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
    if token_positions is None:
        token_positions = torch.arange(in_features.shape[1], device=in_features.device)
    rope = _rope_for_heads(d_model // num_heads, theta, max_seq_len, token_positions)
    w = q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight
    return _attention(d_model, num_heads, *w, in_features, rope)


# --- block and LM ---------------------------------------------------------------------
def _block(d_model, num_heads, d_ff, max_seq_len, theta, weights, x, prefix=""):
    def w(name):
        return weights[prefix + name]

    positions = torch.arange(x.shape[1], device=x.device)
    rope = _rope_for_heads(d_model // num_heads, theta, max_seq_len, positions)
    attn = [w(f"attn.{p}_proj.weight") for p in ("q", "k", "v", "output")]
    z = x + _attention(d_model, num_heads, *attn, run_rmsnorm(d_model, 1e-5, w("ln1.weight"), x), rope)
    h = run_rmsnorm(d_model, 1e-5, w("ln2.weight"), z)
    return z + run_swiglu(d_model, d_ff, w("ffn.w1.weight"), w("ffn.w2.weight"), w("ffn.w3.weight"), h)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    _rank("in_features (b s d_model)", in_features, 3)
    return _block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features)


def run_transformer_lm(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights, in_indices
):
    _rank("in_indices (b s)", in_indices, 2)
    x = run_embedding(vocab_size, d_model, weights["token_embeddings.weight"], in_indices)
    for i in range(num_layers):
        x = _block(d_model, num_heads, d_ff, context_length, rope_theta, weights, x, prefix=f"layers.{i}.")
    x = run_rmsnorm(d_model, 1e-5, weights["ln_final.weight"], x)
    return einsum(x, weights["lm_head.weight"], "b s d, v d -> b s v")


# --- cross-entropy ----------------------------------------------------------------------
def run_cross_entropy(inputs, targets):
    _rank("inputs (b v) or (b s v)", inputs, 2, 3)
    logits = inputs if inputs.dim() == 2 else rearrange(inputs, "b s v -> (b s) v")
    flat_targets = targets if targets.dim() == 1 else rearrange(targets, "b s -> (b s)")
    biggest = logits.max(dim=-1, keepdim=True).values
    log_sum_exp = torch.log(torch.exp(logits - biggest).sum(dim=-1)) + biggest[:, 0]
    picked = logits[torch.arange(logits.shape[0], device=logits.device), flat_targets]
    return (log_sum_exp - picked).mean()
