"""The known bugs of SPEC §2's items (the Transformer LM), replayed on the
float64 oracles of ``nn.py``: one registry, ``KNOWN_BUGS``, read by the tests
of conformance/cs336 (test_nn_ops, test_rope, test_attention, test_model).

A replay takes the inputs the item's oracle takes and returns what the bug
gives (most are the oracles' ``bug=`` switches); a test names its cause only
when the replay reproduces the implementation's output on the failing input
and on the test's second input (conformance/hints.py, ``assert_close(...,
hints=KNOWN_BUGS.thunks(item, ...), again=...)``).
"""

import math
from functools import partial

import torch

from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.hints import KnownBugs

KNOWN_BUGS = KnownBugs()


# --- Linear, Embedding, RMSNorm, SiLU, SwiGLU, softmax ---------------------------
KNOWN_BUGS.add(
    "2.linear",
    "matches W x instead of x Wᵀ (transposed weight)",
    lambda x, weight: oracle.f64(x) @ oracle.f64(weight),
)
KNOWN_BUGS.add(
    "2.embedding",
    "looks up row id+1 (off by one)",
    lambda weight, ids: oracle.embedding(weight, (ids + 1) % weight.shape[0]),
)
KNOWN_BUGS.add(
    "2.embedding",
    "looks up row id-1 (off by one)",
    lambda weight, ids: oracle.embedding(weight, (ids - 1) % weight.shape[0]),
)
for _bug, _cause in (
    ("eps_outside_sqrt", "eps added outside the square root"),
    ("mean_abs", "divides by mean |x| instead of the RMS"),
    ("no_gain", "gain g not applied"),
    ("axis0", "rms computed over the wrong axis (first)"),
    ("all_axes", "rms computed over all axes"),
):
    KNOWN_BUGS.add("2.rmsnorm", _cause, partial(oracle.rmsnorm, bug=_bug))


@KNOWN_BUGS.register("2.rmsnorm", "computed in bfloat16 without the float32 upcast")
def _rmsnorm_in_input_dtype(x, weight, eps):
    if x.element_size() >= 4:  # float32 in: computing in it is the upcast
        raise ValueError(f"no upcast to tell apart for a {x.dtype} input")
    x = x.detach().cpu()  # the formula as written, each step rounded to x's dtype
    return x / torch.sqrt(x.square().mean(-1, keepdim=True) + eps) * weight.detach().cpu().to(x.dtype)


KNOWN_BUGS.add("2.silu", "matches sigmoid(x) (missing the factor x)", lambda x: torch.sigmoid(oracle.f64(x)))
KNOWN_BUGS.add(
    "2.swiglu",
    "SiLU applied to W3 x instead of W1 x (w1 and w3 swapped)",
    lambda x, w1, w2, w3: oracle.swiglu(x, w3, w2, w1),
)
KNOWN_BUGS.add("2.swiglu", "no gate: W2 SiLU(W1 x)", lambda x, w1, w2, w3: oracle.silu_ffn(x, w1, w2))
KNOWN_BUGS.add(
    "2.swiglu",
    "SiLU applied to the product W1 x ⊙ W3 x",
    lambda x, w1, w2, w3: oracle.linear(oracle.silu(oracle.linear(x, w1) * oracle.linear(x, w3)), w2),
)


@KNOWN_BUGS.register("2.softmax", "no max subtraction before exp (exp overflows, or underflows to 0/0)")
def _softmax_unshifted(x, dim):
    # subtle: where exp(x) stays in range the unshifted formula is right, up to rounding
    e = x.detach().cpu().exp()
    if not bool(((e == 0) | e.isinf()).any()):
        raise ValueError("exp(x) stays finite and non-zero: the max shift changes nothing here")
    return oracle.softmax(x, dim, naive=True)


KNOWN_BUGS.add("2.softmax", "normalised over the wrong dim (last)", lambda x, dim: oracle.softmax(x, -1))
KNOWN_BUGS.add("2.softmax", "normalised over the wrong dim (first)", lambda x, dim: oracle.softmax(x, 0))
KNOWN_BUGS.add(
    "2.softmax",
    "returns log-softmax (log-probabilities), not probabilities",
    lambda x, dim: torch.log_softmax(oracle.f64(x), dim),  # not log(softmax): that underflows to −inf
)


# --- RoPE ----------------------------------------------------------------------------
def _deinterleaved(rotated):
    """A correct rotation written back as [all x'₂ₖ, all x'₂ₖ₊₁] (a layout bug)."""
    return torch.cat([rotated[..., 0::2], rotated[..., 1::2]], -1)


KNOWN_BUGS.add(
    "2.rope",
    "matches half-split rotation (rotate-half): pairs must be adjacent (2k, 2k+1)",
    lambda x, positions, theta: oracle.rope(x, positions, theta, pairs="half"),
)
KNOWN_BUGS.add(
    "2.rope",
    "angle uses theta^(k/d_k) instead of theta^(2k/d_k)",
    lambda x, positions, theta: oracle.rope(x, positions, theta, exponent=1.0),
)
KNOWN_BUGS.add(
    "2.rope",
    "rotates by −θ (sin sign flipped)",
    lambda x, positions, theta: oracle.rope(x, positions, theta, sign=-1.0),
)
KNOWN_BUGS.add(
    "2.rope",
    "token_positions ignored (used 0..seq-1)",
    lambda x, positions, theta: oracle.rope(x, torch.arange(x.shape[-2]), theta),
)
KNOWN_BUGS.add(
    "2.rope",
    "pairs (2k, 2k+1) rotated but written back de-interleaved ([x'₀, x'₂, ...; x'₁, x'₃, ...])",
    lambda x, positions, theta: _deinterleaved(oracle.rope(x, positions, theta)),
)


@KNOWN_BUGS.register("2.rope", "angle uses theta^(2k/d_k) with k = 1..d_k/2: the handout's k needs theta^((2k-2)/d_k)")
def _rope_k_from_one(x, positions, theta):
    # theta^(-2(k+1)/d) = theta^(-2/d) · theta^(-2k/d): the same rotation at positions scaled by theta^(-2/d)
    return oracle.rope(x, positions.double() * theta ** (-2 / x.shape[-1]), theta)


# --- attention and multi-head self-attention ------------------------------------------
# Scaled dot-product attention: replays take sdpa's (q, k, v, mask=None); those
# that need a mask raise without one (a replay that raises is not shown).
KNOWN_BUGS.add(
    "2.sdpa",
    "mask inverted (True must mean 'may attend')",
    lambda q, k, v, mask=None: oracle.sdpa(q, k, v, ~mask),
)
KNOWN_BUGS.add(
    "2.sdpa",
    "missing 1/sqrt(d_k) scaling",
    lambda q, k, v, mask=None: oracle.attention(q, k, v, mask, scale=1.0),
)
KNOWN_BUGS.add(
    "2.sdpa",
    "scaled by 1/d_k instead of 1/sqrt(d_k)",
    lambda q, k, v, mask=None: oracle.attention(q, k, v, mask, scale=1.0 / q.shape[-1]),
)
KNOWN_BUGS.add(
    "2.sdpa",
    "masked scores set to 0 instead of −inf",
    lambda q, k, v, mask=None: oracle.attention(q, k, v, mask, masked_value=0.0),
)
KNOWN_BUGS.add("2.sdpa", "mask ignored", lambda q, k, v, mask=None: oracle.sdpa(q, k, v))
KNOWN_BUGS.add(
    "2.sdpa",
    "scores multiplied by sqrt(d_k) instead of divided",
    lambda q, k, v, mask=None: oracle.attention(q, k, v, mask, scale=q.shape[-1] ** 0.5),
)
KNOWN_BUGS.add(
    "2.sdpa",
    "softmax over the queries (dim −2) instead of the keys (dim −1)",
    lambda q, k, v, mask=None: oracle.attention(q, k, v, mask, softmax_dim=-2),
)


# Multi-head self-attention: replays take mha's (x, q_w, k_w, v_w, o_w,
# num_heads, theta=None, positions=None), theta=None being MHA without RoPE;
# the RoPE bugs raise there.
def _mha_with(*, rope: bool = False, **bug):
    def replay(*args, theta=None, positions=None):
        if rope and theta is None:
            raise ValueError("a RoPE bug, and this MHA has no RoPE")
        return oracle.mha(*args, **{"theta": theta, "positions": positions, **bug})

    return replay


for _cause, _bug in (
    ("heads interleaved (head h must take rows h·d_k .. (h+1)·d_k−1)", {"heads": "interleaved"}),
    (
        "heads split from interleaved rows (h, h+H, ...) but concatenated in head order",
        {"heads": "interleaved_split"},
    ),
    ("not causal (future positions visible)", {"mask": "none"}),
    ("causal mask excludes the diagonal (i must see j ≤ i)", {"mask": "strict"}),
    ("causal mask shifted by one (i also sees i+1)", {"mask": "shifted"}),
    ("RoPE also applied to V (Q and K only)", {"rope": True, "rope_on_v": True}),
    ("RoPE not applied", {"rope": True, "theta": None}),
    ("half-split RoPE", {"rope": True, "rope_pairs": "half"}),
    (
        "(batch, seq) token_positions not broadcast over the head axis: head h of every "
        "sequence was rotated with row h's positions (insert a head axis, positions[:, None, :])",
        {"rope": True, "positions_on_head_axis": True},
    ),
):
    KNOWN_BUGS.add("2.mha", _cause, _mha_with(**_bug))


@KNOWN_BUGS.register("2.mha", "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_k) (the head's dimension)")
def _mha_scaled_by_d_model(x, q_w, k_w, v_w, o_w, num_heads, theta=None, positions=None):
    if num_heads == 1:
        raise ValueError("one head: d_k = d_model")
    return oracle.mha(x, q_w, k_w, v_w, o_w, num_heads, theta=theta, positions=positions, scale=q_w.shape[0] ** -0.5)


# --- the block and the LM -------------------------------------------------------------
# The block: replays take block's (x, weights, num_heads, theta); the LM:
# lm's (ids, weights, cfg).
def _block_with(*, rope: bool = False, **bug):
    def replay(x, weights, num_heads, theta):
        if rope and theta is None:
            raise ValueError("a RoPE bug, and this block has no RoPE")
        return oracle.block(x, weights, num_heads, **{"theta": theta, **bug})

    return replay


for _cause, _bug in (
    ("post-norm (RMSNorm after the residual add)", {"norm": "post"}),
    ("missing residual connections (y = FFN(RMSNorm₂(z)), z = MHA(RMSNorm₁(x)))", {"residual": "none"}),
    ("missing residual around the feed-forward (y = FFN(RMSNorm₂(z)) without + z)", {"residual": "attn"}),
    ("no RMSNorm applied", {"norm": "none"}),
    ("RoPE not applied", {"rope": True, "theta": None}),
    ("each residual adds the normalised input (z = RMSNorm₁(x) + MHA(RMSNorm₁(x)))", {"residual": "normed"}),
    ("ln1's gain used for both RMSNorms (ln2.weight never read)", {"norm_weights": "ln1"}),
):
    KNOWN_BUGS.add("2.block", _cause, _block_with(**_bug))

KNOWN_BUGS.add("2.lm", "final RMSNorm missing", lambda ids, w, cfg: oracle.lm(ids, w, cfg, final_norm=False))
KNOWN_BUGS.add("2.lm", "post-norm blocks", lambda ids, w, cfg: oracle.lm(ids, w, cfg, norm="post"))
KNOWN_BUGS.add("2.lm", "RoPE not applied", lambda ids, w, cfg: oracle.lm(ids, w, cfg, use_rope=False))
KNOWN_BUGS.add(
    "2.lm",
    "returns probabilities (softmax of the logits), not logits",
    lambda ids, w, cfg: oracle.lm(ids, w, cfg, output="probabilities"),
)
KNOWN_BUGS.add(
    "2.lm",
    "returns log-probabilities (log-softmax of the logits), not logits",
    lambda ids, w, cfg: oracle.lm(ids, w, cfg, output="log_probabilities"),
)
KNOWN_BUGS.add(
    "2.lm",
    "LM head tied to the token embeddings (lm_head.weight never read)",
    lambda ids, w, cfg: oracle.lm(ids, w, cfg, tied=True),
)


# The ablations (extended profile): replays take the block's (x, weights,
# num_heads, theta) or the LM's (ids, weights, cfg), with the ablation's norm,
# use_rope and ffn keywords; theta is the one the adapter was given, used or not.
def _ablated(*args, norm, use_rope, ffn, final_norm=True):
    if isinstance(args[-1], oracle.ModelConfig):
        return oracle.lm(*args, norm=norm, use_rope=use_rope, ffn=ffn, final_norm=final_norm)
    x, weights, num_heads, theta = args
    return oracle.block(x, weights, num_heads, theta if use_rope else None, norm=norm, ffn=ffn)


@KNOWN_BUGS.register("2.ablations", "use_rope=False not honoured: RoPE applied anyway")
def _nope_ignored(*args, norm, use_rope, ffn):
    if use_rope:
        raise ValueError("this ablation keeps RoPE")
    return _ablated(*args, norm=norm, use_rope=True, ffn=ffn)


@KNOWN_BUGS.register("2.ablations", "norm='post' LM without the final RMSNorm (only norm='none' drops ln_final)")
def _post_without_final_norm(*args, norm, use_rope, ffn):
    if norm != "post" or not isinstance(args[-1], oracle.ModelConfig):
        raise ValueError("not the post-norm LM ablation")
    return _ablated(*args, norm=norm, use_rope=use_rope, ffn=ffn, final_norm=False)


# --- accounting (extended profile): replays take a ModelConfig -------------------------
# The count is a sum of weight sizes and the FLOPs a sum of 2mnp per product: a
# switch leaves a term out, counts one it should not, or counts a product
# another way. One vocab×d_model matrix missing is one switch: the LM head
# tied to the embedding and the embedding left out give the same number.
PARAMETERS, FLOPS = "parameter count: ", "forward FLOPs: "


def _count_without(*names: str, extra: int = 0):
    def replay(cfg: oracle.ModelConfig) -> int:
        shapes = oracle.lm_weight_shapes(cfg)
        left = [s for k, s in shapes.items() if k.split(".")[-2] not in names]
        return sum(math.prod(s) for s in left) + extra * cfg.context_length * cfg.d_model

    return replay


for _names, _extra, _cause in (
    (("lm_head",), 0, "one vocab_size×d_model matrix not counted (the LM head tied to the embedding?)"),
    (("ln1", "ln2", "ln_final"), 0, "the RMSNorm gains not counted (2 per block and the final one)"),
    (("ln_final",), 0, "the final RMSNorm's gain not counted"),
    (("w3",), 0, "the FFN counted with two matrices (W3, SwiGLU's gate, left out)"),
    ((), 1, "a learned position table counted (context_length×d_model): RoPE has no parameters"),
):
    KNOWN_BUGS.add("2.accounting", PARAMETERS + _cause, _count_without(*_names, extra=_extra))


def _flops_with(scale: dict[str, float]):
    def replay(cfg: oracle.ModelConfig) -> dict[str, int]:
        got = oracle.forward_flops(cfg, one_layer_scaled=True)
        out = {k: int(v * scale.get(k, scale.get("*", 1))) for k, v in got.items() if k != "total"}
        return {**out, "total": sum(out.values())}

    return replay


for _scale, _cause in (
    (
        {"attn_scores": 0.5, "attn_values": 0.5},
        "QKᵀ and the weights-times-V product halved for the causal mask: count the full n×n products",
    ),
    ({"*": 0.5}, "each product counted as m·n·p: a matmul is 2mnp FLOPs (a multiply and an add)"),
    ({"ffn": 2 / 3}, "the FFN counted with two matrices (W3, SwiGLU's gate, left out)"),
    ({"lm_head": 0}, "the LM head's product not counted"),
):
    KNOWN_BUGS.add("2.accounting", FLOPS + _cause, _flops_with(_scale))
