"""The known bugs of SPEC §2's items (the Transformer LM), replayed on the
float64 oracles of ``nn.py``: one registry, ``KNOWN_BUGS``, read by the tests
of conformance/cs336 (test_nn_ops, test_rope, test_attention, test_model).

A replay takes the inputs the item's oracle takes and returns what the bug
gives (most are the oracles' ``bug=`` switches); a test names its cause only
when the replay reproduces the implementation's output on the failing input
and on the test's second input (conformance/hints.py, ``assert_close(...,
hints=KNOWN_BUGS.thunks(item, ...), again=...)``).
"""

from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.hints import KnownBugs

KNOWN_BUGS = KnownBugs()


# --- Linear, Embedding, RMSNorm, SiLU, SwiGLU, softmax ---------------------------


# --- RoPE ----------------------------------------------------------------------------


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
):
    KNOWN_BUGS.add("2.block", _cause, _block_with(**_bug))

KNOWN_BUGS.add("2.lm", "final RMSNorm missing", lambda ids, w, cfg: oracle.lm(ids, w, cfg, final_norm=False))
KNOWN_BUGS.add("2.lm", "post-norm blocks", lambda ids, w, cfg: oracle.lm(ids, w, cfg, norm="post"))
KNOWN_BUGS.add("2.lm", "RoPE not applied", lambda ids, w, cfg: oracle.lm(ids, w, cfg, use_rope=False))


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
