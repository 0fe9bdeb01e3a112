"""Oracles for SPEC §2 (Transformer LM): float64 on CPU, written apart from any
implementation under test.

Each op is either a torch built-in run in float64 (``F.linear``,
``F.embedding``, ``F.rms_norm``, ``F.silu``, ``torch.softmax``,
``F.scaled_dot_product_attention``) or an explicit float64 formula (RoPE by
a 2×2 rotation per pair, multi-head attention by a loop over heads, the block
and the LM composed from those parts and addressed by the SPEC §2 state-dict
names). Keyword switches reproduce known bugs (half-split RoPE, interleaved
heads, post-norm...): tests use them for the "likely cause" hints only, never
as expectations.

Every function also accepts tensors on the ``meta`` device, so the accounting
tests can run the LM oracle at GPT-2 XL size under ``FlopCounterMode`` without
computing anything (``probe`` names the component each matmul belongs to).
"""

import contextlib
import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

F64 = torch.float64
RMSNORM_EPS = 1e-5  # SPEC §2 default

Probe = Callable[[str], AbstractContextManager]

#: Parts swapped into a composite (hints only: "explained by 2.rmsnorm"): a
#: name -> a callable with the oracle part's signature. Names: "rmsnorm"
#: (x, weight, eps), "ffn" (x, w1, w2, w3), "mha" (x, q_w, k_w, v_w, o_w,
#: num_heads, theta, positions), "sdpa" (q, k, v, mask), "rope" (x, positions,
#: theta), "softmax" (x, dim), "embedding" (weight, ids), "lm_head" (x, weight),
#: "block" (x, weights without "layers.{i}.", num_heads, theta).
Parts = Mapping[str, Callable[..., Tensor]]
NO_PARTS: Parts = {}


def _no_probe(_name: str) -> AbstractContextManager:
    return contextlib.nullcontext()


def f64(t: Tensor) -> Tensor:
    """``t`` as float64 on CPU (meta tensors stay on meta)."""
    if t.device.type == "meta":
        return t.to(F64)
    return t.detach().to("cpu", F64)


# --- elementwise and small ops ------------------------------------------------
def linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x Wᵀ`` (F.linear in float64)."""
    return F.linear(f64(x), f64(weight))


def embedding(weight: Tensor, ids: Tensor) -> Tensor:
    """Row lookup (F.embedding in float64)."""
    ids = ids if ids.device.type == "meta" else ids.detach().cpu()
    return F.embedding(ids.long(), f64(weight))


def rmsnorm(x: Tensor, weight: Tensor, eps: float, *, bug: str | None = None) -> Tensor:
    """``x / sqrt(mean(x²) + eps) · g`` (F.rms_norm in float64).

    ``bug`` (hints only): "eps_outside_sqrt", "mean_abs", "no_gain",
    "axis0" (statistic over the first axis), "all_axes".
    """
    x, g = f64(x), f64(weight)
    if bug is None:
        return F.rms_norm(x, (x.shape[-1],), g, eps)
    if bug == "eps_outside_sqrt":
        return x / (x.square().mean(-1, keepdim=True).sqrt() + eps) * g
    if bug == "mean_abs":
        return x / (x.abs().mean(-1, keepdim=True) + eps) * g
    if bug == "no_gain":
        return F.rms_norm(x, (x.shape[-1],), None, eps)
    if bug == "axis0":
        return x / (x.square().mean(0, keepdim=True) + eps).sqrt() * g
    if bug == "all_axes":
        return x / (x.square().mean() + eps).sqrt() * g
    raise ValueError(f"unknown rmsnorm bug {bug!r}")


def silu(x: Tensor) -> Tensor:
    """``x σ(x)`` (F.silu in float64)."""
    return F.silu(f64(x))


def swiglu(x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor, probe: Probe = _no_probe) -> Tensor:
    """``W2 (SiLU(W1 x) ⊙ W3 x)``."""
    with probe("ffn"):
        return linear(silu(linear(x, w1)) * linear(x, w3), w2)


def silu_ffn(x: Tensor, w1: Tensor, w2: Tensor, probe: Probe = _no_probe) -> Tensor:
    """Ablation FFN ``W2 SiLU(W1 x)``."""
    with probe("ffn"):
        return linear(silu(linear(x, w1)), w2)


def softmax(x: Tensor, dim: int, *, naive: bool = False) -> Tensor:
    """torch.softmax in float64; ``naive`` (hints): exp/sum without the max
    shift, evaluated in the input's own dtype so overflow shows."""
    if naive:
        e = x.detach().cpu().exp()
        return f64(e / e.sum(dim, keepdim=True))
    return torch.softmax(f64(x), dim)


# --- RoPE ----------------------------------------------------------------------
def rope_angles(positions: Tensor, d_k: int, theta: float, *, exponent: float = 2.0) -> Tensor:
    """``θ_{i,k} = i / theta^(exponent·k/d_k)``, shape ``(*positions.shape, d_k/2)``
    (SPEC: exponent 2; a bug uses 1)."""
    k = torch.arange(d_k // 2, dtype=F64, device=positions.device)
    inv_freq = theta ** (-exponent * k / d_k)
    return positions.to(F64)[..., None] * inv_freq


def rope(
    x: Tensor,
    positions: Tensor,
    theta: float,
    *,
    pairs: str = "interleaved",
    exponent: float = 2.0,
    sign: float = 1.0,
) -> Tensor:
    """Rotate each pair by its angle: ``(x₂ₖ, x₂ₖ₊₁) ↦ R(θ_{i,k}) (x₂ₖ, x₂ₖ₊₁)``.

    ``positions (..., seq)`` broadcasts against ``x (..., seq, d_k)``. Hints
    only: ``pairs="half"`` pairs ``(x_k, x_{k+d/2})`` (rotate-half),
    ``exponent=1`` the wrong frequency exponent, ``sign=-1`` the inverse rotation.
    """
    x = f64(x)
    d_k = x.shape[-1]
    positions = positions if positions.device.type == "meta" else positions.detach().cpu()
    angle = sign * rope_angles(positions, d_k, theta, exponent=exponent)
    cos, sin = angle.cos(), angle.sin()
    # R = [[cos, -sin], [sin, cos]] per (position, pair), applied elementwise.
    rot = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
    if pairs == "interleaved":
        pair = x.unflatten(-1, (d_k // 2, 2))  # (..., seq, d_k/2, 2): (x_2k, x_2k+1)
    elif pairs == "half":
        pair = torch.stack([x[..., : d_k // 2], x[..., d_k // 2 :]], -1)
    else:
        raise ValueError(f"unknown pairs {pairs!r}")
    out = (rot * pair[..., None, :]).sum(-1)  # (..., seq, d_k/2, 2)
    if pairs == "half":
        return torch.cat([out[..., 0], out[..., 1]], -1)
    return out.flatten(-2)


# --- attention -------------------------------------------------------------------
def sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """``softmax(QKᵀ/√d_k, masked −inf) V`` (F.scaled_dot_product_attention in
    float64; True = may attend)."""
    m = None if mask is None else mask.detach().cpu().bool()
    return F.scaled_dot_product_attention(f64(q), f64(k), f64(v), attn_mask=m)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    masked_value: float = -math.inf,
    probe: Probe = _no_probe,
    parts: Parts = NO_PARTS,
    softmax_dim: int = -1,
) -> Tensor:
    """The explicit formula behind :func:`sdpa`. A row without any allowed
    key gives zeros. Hints: ``scale=1`` (missing 1/√d_k),
    ``masked_value=0`` (masked scores zeroed instead of −inf),
    ``softmax_dim=-2`` (normalised over the queries; a column without any
    allowed query stays NaN, as such a softmax gives)."""
    q, k, v = f64(q), f64(k), f64(v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    with probe("attn_scores"):
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        mask = mask if mask.device.type == "meta" else mask.detach().cpu()
        scores = scores.masked_fill(~mask.bool(), masked_value)
    if softmax_dim != -1:
        weights = torch.softmax(scores, softmax_dim)
    else:
        weights = (f64(parts["softmax"](scores, -1)) if "softmax" in parts else torch.softmax(scores, -1)).nan_to_num(
            0.0
        )
    with probe("attn_values"):
        return torch.matmul(weights, v)


def causal_mask(seq: int, *, kind: str = "causal", device: torch.device | str = "cpu") -> Tensor:
    """``(seq, seq)`` bool, True = may attend: "causal" j ≤ i; bugs: "strict"
    j < i (diagonal excluded), "shifted" j ≤ i + 1 (one future token seen),
    "none" all True (no mask)."""
    i = torch.arange(seq, device=device)
    if kind == "causal":
        return i[None, :] <= i[:, None]
    if kind == "strict":
        return i[None, :] < i[:, None]
    if kind == "shifted":
        return i[None, :] <= i[:, None] + 1
    if kind == "none":
        return torch.ones(seq, seq, dtype=torch.bool, device=device)
    raise ValueError(f"unknown mask kind {kind!r}")


def mha(
    x: Tensor,
    q_w: Tensor,
    k_w: Tensor,
    v_w: Tensor,
    o_w: Tensor,
    num_heads: int,
    *,
    theta: float | None = None,
    positions: Tensor | None = None,
    heads: str = "grouped",
    rope_on_v: bool = False,
    rope_pairs: str = "interleaved",
    mask: str = "causal",
    positions_on_head_axis: bool = False,
    scale: float | None = None,
    probe: Probe = _no_probe,
    parts: Parts = NO_PARTS,
) -> Tensor:
    """Causal multi-head self-attention, one head at a time.

    Head ``h`` uses rows ``h·d_k .. (h+1)·d_k−1`` of W_Q, W_K, W_V (grouped);
    RoPE (when ``theta`` is given) rotates Q and K with ``positions``
    (default ``0..seq-1``); heads are concatenated in order and projected by
    W_O. Hints only: ``heads="interleaved"`` (rows h, h+H, ..., merged back
    the same way), ``heads="interleaved_split"`` (merged in head order),
    ``rope_on_v``, ``rope_pairs="half"``, ``mask="none"|"strict"|"shifted"``, ``positions_on_head_axis``
    ((batch, seq) positions broadcast against (batch, heads, seq, d_k) without
    a head axis: with batch = heads, head h of every sequence takes row h's
    positions), ``scale`` (the scores' factor, default 1/√d_k).
    """
    x = f64(x)
    seq = x.shape[-2]
    d_k = q_w.shape[0] // num_heads
    if positions is None:
        positions = torch.arange(seq, device=x.device)
    allowed = causal_mask(seq, kind=mask, device=x.device)
    outs = []
    for h in range(num_heads):
        rows = slice(h * d_k, (h + 1) * d_k) if heads == "grouped" else slice(h, None, num_heads)
        with probe("attn_qkv"):
            q, k, v = linear(x, q_w[rows]), linear(x, k_w[rows]), linear(x, v_w[rows])
        if theta is not None:
            pos = positions
            if positions_on_head_axis:
                if positions.dim() != 2 or positions.shape[0] != num_heads:
                    raise ValueError("positions_on_head_axis needs (batch = num_heads, seq) positions")
                pos = positions[h]
            if "rope" in parts:
                q, k = f64(parts["rope"](q, pos, theta)), f64(parts["rope"](k, pos, theta))
            else:
                q, k = rope(q, pos, theta, pairs=rope_pairs), rope(k, pos, theta, pairs=rope_pairs)
            if rope_on_v:
                v = rope(v, pos, theta, pairs=rope_pairs)
        if "sdpa" in parts:
            outs.append(f64(parts["sdpa"](q, k, v, allowed.expand(*q.shape[:-2], seq, seq))))
        else:
            outs.append(attention(q, k, v, allowed, scale=scale, probe=probe, parts=parts))
    with probe("attn_output"):
        merged = torch.stack(outs, -1).flatten(-2) if heads == "interleaved" else torch.cat(outs, -1)
        return linear(merged, o_w)


# --- block and LM ------------------------------------------------------------------
def block(
    x: Tensor,
    weights: Mapping[str, Tensor],
    num_heads: int,
    theta: float | None,
    *,
    positions: Tensor | None = None,
    norm: str = "pre",
    ffn: str = "swiglu",
    residual: str = "both",
    norm_weights: str | None = None,
    eps: float = RMSNORM_EPS,
    probe: Probe = _no_probe,
    parts: Parts = NO_PARTS,
) -> Tensor:
    """Pre-norm block ``z = x + MHA(RMSNorm₁(x))``, ``y = z + FFN(RMSNorm₂(z))``.

    ``theta=None`` is NoPE. Ablations: ``norm="post"`` (``z = RMSNorm₁(x +
    MHA(x))``...), ``norm="none"``; ``ffn="silu"``. Bugs (hints only):
    ``residual="none"`` (no residual adds), ``residual="attn"`` (only around
    attention, the FFN's missing), ``residual="normed"`` (each residual adds
    the normalised input), ``norm_weights="ln1"`` (one norm's gain for both).
    Keys are the SPEC §2 names without ``layers.{i}.``.
    ``parts`` (hints only): "rmsnorm", "mha", "ffn" (SwiGLU) swapped in.
    """
    x = f64(x)

    def attn(h: Tensor) -> Tensor:
        w = [weights[f"attn.{p}_proj.weight"] for p in ("q", "k", "v", "output")]
        if "mha" in parts:
            return f64(parts["mha"](h, *w, num_heads, theta, positions))
        return mha(h, *w, num_heads, theta=theta, positions=positions, probe=probe, parts=parts)

    def feed_forward(h: Tensor) -> Tensor:
        if ffn == "silu":
            return silu_ffn(h, weights["ffn.w1.weight"], weights["ffn.w2.weight"], probe=probe)
        w = weights["ffn.w1.weight"], weights["ffn.w2.weight"], weights["ffn.w3.weight"]
        return f64(parts["ffn"](h, *w)) if "ffn" in parts else swiglu(h, *w, probe=probe)

    def ln(name: str, h: Tensor) -> Tensor:
        name = norm_weights or name
        if "rmsnorm" in parts:
            return f64(parts["rmsnorm"](h, weights[f"{name}.weight"], eps))
        return rmsnorm(h, weights[f"{name}.weight"], eps)

    if residual not in ("both", "attn", "none", "normed"):
        raise ValueError(f"unknown residual {residual!r}")
    keep_x = 0.0 if residual == "none" else 1.0  # x around attention
    keep_z = 1.0 if residual in ("both", "normed") else 0.0  # z around the FFN
    if norm == "pre" and residual == "normed":  # each residual adds the normalised input
        h = ln("ln1", x)
        z = h + attn(h)
        h = ln("ln2", z)
        return h + feed_forward(h)
    if norm == "pre":
        z = keep_x * x + attn(ln("ln1", x))
        return keep_z * z + feed_forward(ln("ln2", z))
    if norm == "post":
        z = ln("ln1", keep_x * x + attn(x))
        return ln("ln2", keep_z * z + feed_forward(z))
    if norm == "none":
        z = keep_x * x + attn(x)
        return keep_z * z + feed_forward(z)
    raise ValueError(f"unknown norm {norm!r}")


class ModelConfig(NamedTuple):
    """``run_transformer_lm`` hyperparameters (SPEC §2 "Transformer LM")."""

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    rope_theta: float = 10000.0


def block_weight_shapes(
    d_model: int, d_ff: int, *, norm: str = "pre", ffn: str = "swiglu"
) -> dict[str, tuple[int, ...]]:
    """State-dict names and shapes of one block (SPEC §2), for the given ablation."""
    shapes: dict[str, tuple[int, ...]] = {
        f"attn.{p}_proj.weight": (d_model, d_model) for p in ("q", "k", "v", "output")
    }
    if norm != "none":
        shapes["ln1.weight"] = shapes["ln2.weight"] = (d_model,)
    shapes["ffn.w1.weight"] = (d_ff, d_model)
    shapes["ffn.w2.weight"] = (d_model, d_ff)
    if ffn == "swiglu":
        shapes["ffn.w3.weight"] = (d_ff, d_model)
    return shapes


def lm_weight_shapes(cfg: ModelConfig, *, norm: str = "pre", ffn: str = "swiglu") -> dict[str, tuple[int, ...]]:
    """State-dict names and shapes of the whole LM (SPEC §2): every trainable
    parameter, nothing else (RoPE tables are non-persistent buffers)."""
    shapes: dict[str, tuple[int, ...]] = {"token_embeddings.weight": (cfg.vocab_size, cfg.d_model)}
    for i in range(cfg.num_layers):
        for name, shape in block_weight_shapes(cfg.d_model, cfg.d_ff, norm=norm, ffn=ffn).items():
            shapes[f"layers.{i}.{name}"] = shape
    if norm != "none":
        shapes["ln_final.weight"] = (cfg.d_model,)
    shapes["lm_head.weight"] = (cfg.vocab_size, cfg.d_model)
    return shapes


def parameter_count(cfg: ModelConfig) -> int:
    """Trainable parameters: the sum of the sizes of every state-dict weight."""
    return sum(math.prod(shape) for shape in lm_weight_shapes(cfg).values())


def lm(
    ids: Tensor,
    weights: Mapping[str, Tensor],
    cfg: ModelConfig,
    *,
    norm: str = "pre",
    use_rope: bool = True,
    ffn: str = "swiglu",
    final_norm: bool = True,
    output: str = "logits",
    tied: bool = False,
    probe: Probe = _no_probe,
    parts: Parts = NO_PARTS,
) -> Tensor:
    """Embedding → ``num_layers`` blocks → final RMSNorm → LM head; logits
    ``(..., seq, vocab)``. ``norm="none"`` also drops the final norm (extended
    profile). Bugs (hints only): ``final_norm=False``, ``output="probabilities"``
    or ``"log_probabilities"`` (softmax or log-softmax of the logits), ``tied``
    (the LM head reads the token embeddings). ``parts`` (hints
    only): the block's, "embedding", "lm_head" and "block" swapped in."""
    emb = weights["token_embeddings.weight"]
    h = f64(parts["embedding"](emb, ids)) if "embedding" in parts else embedding(emb, ids)
    theta = cfg.rope_theta if use_rope else None
    for i in range(cfg.num_layers):
        prefix = f"layers.{i}."
        layer = {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}
        if "block" in parts:
            h = f64(parts["block"](h, layer, cfg.num_heads, theta))
        else:
            h = block(h, layer, cfg.num_heads, theta, norm=norm, ffn=ffn, probe=probe, parts=parts)
    if norm != "none" and final_norm:
        w = weights["ln_final.weight"]
        h = f64(parts["rmsnorm"](h, w, RMSNORM_EPS)) if "rmsnorm" in parts else rmsnorm(h, w, RMSNORM_EPS)
    head = weights["token_embeddings.weight" if tied else "lm_head.weight"]
    if "lm_head" in parts:
        return f64(parts["lm_head"](h, head))
    with probe("lm_head"):
        logits = linear(h, head)
    if output == "logits":
        return logits
    if output == "probabilities":
        return torch.softmax(logits, -1)
    if output == "log_probabilities":
        return torch.log_softmax(logits, -1)
    raise ValueError(f"unknown output {output!r}")


FLOP_COMPONENTS = ("attn_qkv", "attn_scores", "attn_values", "attn_output", "ffn", "lm_head")


def forward_flops(cfg: ModelConfig, *, one_layer_scaled: bool = False) -> dict[str, int]:
    """Matmul FLOPs of one forward pass over one sequence of
    ``context_length`` tokens, per component, counted by
    ``torch.utils.flop_counter.FlopCounterMode`` (2mnp per product) while the
    LM oracle runs on the meta device (shapes only, no arithmetic).

    "total" is what the counter saw over the whole forward, so a matmul the
    probes missed would make it differ from the sum of the components.
    ``one_layer_scaled``: run one layer and multiply the per-layer components
    by ``num_layers`` (all layers have the same shapes); seconds faster at
    GPT-2 XL size, where the head-by-head meta run is slow.
    """
    if one_layer_scaled and cfg.num_layers > 1:
        one = forward_flops(cfg._replace(num_layers=1))
        scaled = {k: v * (1 if k == "lm_head" else cfg.num_layers) for k, v in one.items() if k != "total"}
        scaled["total"] = one["lm_head"] + (one["total"] - one["lm_head"]) * cfg.num_layers
        return scaled
    from torch.utils.flop_counter import FlopCounterMode

    counts = dict.fromkeys(FLOP_COMPONENTS, 0)
    active: list[str] = []
    whole = FlopCounterMode(display=False)

    @contextlib.contextmanager
    def probe(name: str):
        if active:  # nested (attention inside a component): counted once, outermost
            yield
            return
        active.append(name)
        before = whole.get_total_flops()
        yield
        counts[name] += whole.get_total_flops() - before
        active.pop()

    weights = {k: torch.empty(s, device="meta", dtype=F64) for k, s in lm_weight_shapes(cfg).items()}
    ids = torch.zeros(1, cfg.context_length, dtype=torch.long, device="meta")
    with whole:
        # RoPE is elementwise (no matmul), so NoPE has the same matmul FLOPs and
        # keeps the meta run fast at GPT-2 XL size.
        lm(ids, weights, cfg, use_rope=False, probe=probe)
    counts["total"] = whole.get_total_flops()
    return counts


GPT2_XL = ModelConfig(
    vocab_size=50_257, context_length=1_024, d_model=1_600, num_layers=48, num_heads=25, d_ff=6_400
)  # SPEC §2 "GPT-2 XL shape for checks"
