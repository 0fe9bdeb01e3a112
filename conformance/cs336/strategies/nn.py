"""Hypothesis strategies for SPEC §2 (Transformer LM).

Shapes are drawn (and shrink); tensor values come from a drawn seed through a
private ``torch.Generator``, so an example is reproducible from its seed and
global RNG state is never touched. Every tensor is float32 on CPU; tests move
it to their device and dtype. Activations are standard normal and weights
have std ``1/sqrt(fan_in)``, so every output is O(1) and one tolerance
``atol = rtol`` fits (conformance/tolerances.py). Composites return
NamedTuples; size caps are the module constants below.
"""

import math
from typing import NamedTuple

import torch
from hypothesis import strategies as st
from torch import Tensor

from lmspec.conformance.cs336.oracles.nn import ModelConfig, block_weight_shapes, lm_weight_shapes

MAX_LEAD_DIMS = 3  # "any number of leading dims": 0..3 of them
MAX_LEAD_SIZE = 3

# How many leading (batch-like) dims a case has, before the op's own trailing
# dims. MUST tests draw the course's contract (SPEC §2 "Shapes"); STRICT tests
# draw any number, the contract's included.
ANY_LEAD = tuple(range(MAX_LEAD_DIMS + 1))
BATCH_SEQ = (2,)  # x (batch, seq, d): Linear, SwiGLU, RMSNorm (leading dims before d)
BATCH = (1,)  # x (batch, seq, d) for MHA and the block, ids (batch, seq): leading dims before seq
BATCH_OR_HEADS = (1, 2)  # (batch, n, d) or (batch, heads, n, d): SDPA and RoPE
MATRIX_OR_BATCH_SEQ = (1, 2)  # SiLU: the official test's (rows, d) and (batch, seq, d_ff)
MAX_WIDTH = 48  # d_in, d_out, d_model, d_ff of single ops
MAX_SEQ = 10
MAX_ROPE_DK = 32
MAX_POSITION = 256  # largest max_seq_len for RoPE
THETAS = (10000.0, 500.0, 1e6)  # SPEC default first
EPSILONS = (1e-5, 1e-6, 1e-3, 0.1)  # RMSNorm eps; SPEC default first

seeds = st.integers(0, 2**31 - 1)


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *shape: int, std: float = 1.0) -> Tensor:
    return torch.randn(shape, generator=g) * std


def weight(g: torch.Generator, d_out: int, d_in: int) -> Tensor:
    """A ``(d_out, d_in)`` weight with std ``1/sqrt(d_in)``."""
    return randn(g, d_out, d_in, std=1.0 / math.sqrt(d_in))


@st.composite
def leading_shapes(
    draw: st.DrawFn, *, dims: tuple[int, ...] = ANY_LEAD, max_side: int = MAX_LEAD_SIZE
) -> tuple[int, ...]:
    """Batch-like leading dims ``(...)``: a number of them taken from ``dims``,
    each of size 1..max_side."""
    n = draw(st.sampled_from(dims), label="number of leading dims")
    return tuple(draw(st.lists(st.integers(1, max_side), min_size=n, max_size=n), label="leading sizes"))


@st.composite
def broadcast_of(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape``: a suffix of it, some sides set to 1."""
    keep = draw(st.integers(0, len(shape)), label="broadcast kept dims")
    suffix = shape[len(shape) - keep :]
    ones = draw(st.lists(st.booleans(), min_size=keep, max_size=keep), label="sides set to 1")
    return tuple(1 if one else side for side, one in zip(suffix, ones))


# --- single ops ---------------------------------------------------------------------
class LinearCase(NamedTuple):
    x: Tensor  # (..., d_in)
    weight: Tensor  # (d_out, d_in)


@st.composite
def linear_cases(
    draw: st.DrawFn, *, lead_dims: tuple[int, ...] = ANY_LEAD, max_width: int = MAX_WIDTH, integer: bool = False
) -> LinearCase:
    """``integer=True``: small integer values, so every summation order of
    ``x Wᵀ`` is exact in float32."""
    lead = draw(leading_shapes(dims=lead_dims), label="leading dims")
    d_in = draw(st.integers(1, max_width), label="d_in")
    d_out = draw(st.integers(1, max_width), label="d_out")
    g = generator(draw(seeds, label="seed"))
    if integer:
        x = torch.randint(-8, 9, (*lead, d_in), generator=g).float()
        return LinearCase(x, torch.randint(-8, 9, (d_out, d_in), generator=g).float())
    return LinearCase(randn(g, *lead, d_in), weight(g, d_out, d_in))


class EmbeddingCase(NamedTuple):
    weight: Tensor  # (vocab, d_model)
    token_ids: Tensor  # (..., seq) int64


@st.composite
def embedding_cases(
    draw: st.DrawFn, *, lead_dims: tuple[int, ...] = ANY_LEAD, max_vocab: int = 64, max_width: int = MAX_WIDTH
) -> EmbeddingCase:
    """Ids ``(*lead, seq)``: ``lead_dims=BATCH`` gives the contract's ``(batch, seq)``."""
    vocab = draw(st.integers(1, max_vocab), label="vocab_size")
    d_model = draw(st.integers(1, max_width), label="d_model")
    lead = draw(leading_shapes(dims=lead_dims), label="leading dims")
    seq = draw(st.integers(1, MAX_SEQ), label="seq")
    g = generator(draw(seeds, label="seed"))
    ids = torch.randint(0, vocab, (*lead, seq), generator=g)
    return EmbeddingCase(randn(g, vocab, d_model), ids)


class RMSNormCase(NamedTuple):
    x: Tensor  # (..., d_model)
    weight: Tensor  # (d_model,)
    eps: float


@st.composite
def rmsnorm_cases(draw: st.DrawFn, *, lead_dims: tuple[int, ...] = ANY_LEAD, max_width: int = MAX_WIDTH) -> RMSNormCase:
    """Input scales from 1e-3 (where eps matters) to 30; gains around 1."""
    lead = draw(leading_shapes(dims=lead_dims), label="leading dims")
    d_model = draw(st.integers(1, max_width), label="d_model")
    eps = draw(st.sampled_from(EPSILONS), label="eps")
    scale = draw(st.sampled_from((1.0, 1e-3, 30.0)), label="input scale")
    g = generator(draw(seeds, label="seed"))
    return RMSNormCase(randn(g, *lead, d_model, std=scale), 1.0 + randn(g, d_model, std=0.5), eps)


@st.composite
def activations(draw: st.DrawFn, *, lead_dims: tuple[int, ...] = ANY_LEAD, max_width: int = MAX_WIDTH) -> Tensor:
    """``(..., n)`` activations, scale 1 to 10 (saturating sigmoids included)."""
    lead = draw(leading_shapes(dims=lead_dims), label="leading dims")
    n = draw(st.integers(1, max_width), label="width")
    scale = draw(st.sampled_from((1.0, 10.0)), label="scale")
    return randn(generator(draw(seeds, label="seed")), *lead, n, std=scale)


class SwiGLUCase(NamedTuple):
    x: Tensor  # (..., d_model)
    w1: Tensor  # (d_ff, d_model)
    w2: Tensor  # (d_model, d_ff)
    w3: Tensor  # (d_ff, d_model)


@st.composite
def swiglu_cases(draw: st.DrawFn, *, lead_dims: tuple[int, ...] = ANY_LEAD, max_width: int = MAX_WIDTH) -> SwiGLUCase:
    lead = draw(leading_shapes(dims=lead_dims), label="leading dims")
    d_model = draw(st.integers(1, max_width // 2), label="d_model")
    d_ff = draw(st.integers(1, max_width), label="d_ff")
    g = generator(draw(seeds, label="seed"))
    x = randn(g, *lead, d_model)
    return SwiGLUCase(x, weight(g, d_ff, d_model), weight(g, d_model, d_ff), weight(g, d_ff, d_model))


class SoftmaxCase(NamedTuple):
    x: Tensor
    dim: int


@st.composite
def softmax_cases(draw: st.DrawFn, *, max_dims: int = 4, max_side: int = 6, grid: bool = False) -> SoftmaxCase:
    """Any rank 1..max_dims, any ``dim`` (negative too): all of it is the
    contract (SPEC §2). ``grid=True``: values are multiples of 1/64 in (-8, 8),
    so adding an integer up to 2^10 is exact in float32 (for shift invariance)."""
    shape = tuple(draw(st.lists(st.integers(1, max_side), min_size=1, max_size=max_dims), label="shape"))
    dim = draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    g = generator(draw(seeds, label="seed"))
    if grid:
        return SoftmaxCase(torch.randint(-511, 512, shape, generator=g).float() / 64, dim)
    scale = draw(st.sampled_from((1.0, 5.0)), label="scale")
    return SoftmaxCase(randn(g, *shape, std=scale), dim)


# --- RoPE -------------------------------------------------------------------------------
def contract_position_leads(lead: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Leading dims of ``token_positions`` the contract names for a RoPE input
    with leading dims ``lead`` (SPEC §2): ``(seq,)`` and ``(1, seq)`` always,
    ``(batch, seq)`` for a ``(batch, seq, d_k)`` input."""
    leads = [(), (1,)]
    if len(lead) == 1 and lead != (1,):
        leads.append(lead)
    return leads


class RopeCase(NamedTuple):
    x: Tensor  # (..., seq, d_k)
    positions: Tensor  # (..., seq) int64, broadcasting against x's leading dims
    theta: float
    max_seq_len: int


@st.composite
def rope_cases(
    draw: st.DrawFn,
    *,
    lead_dims: tuple[int, ...] = ANY_LEAD,
    contract_positions: bool = False,
    max_dk: int = MAX_ROPE_DK,
    max_position: int = MAX_POSITION,
) -> RopeCase:
    """Positions are arbitrary (any order, repeats, gaps) below max_seq_len
    (≥ seq). Their leading dims are one of the contract's
    (``contract_positions``, see ``contract_position_leads``) or any shape
    that broadcasts against the input's."""
    lead = draw(leading_shapes(dims=lead_dims), label="leading dims")
    seq = draw(st.integers(1, MAX_SEQ), label="seq")
    d_k = 2 * draw(st.integers(1, max_dk // 2), label="d_k/2")
    max_seq_len = draw(st.integers(seq, max_position), label="max_seq_len")
    theta = draw(st.sampled_from(THETAS), label="theta")
    if contract_positions:
        pos_lead = draw(st.sampled_from(contract_position_leads(lead)), label="positions leading dims")
    else:
        pos_lead = draw(broadcast_of(lead), label="positions leading dims")
    g = generator(draw(seeds, label="seed"))
    positions = torch.randint(0, max_seq_len, (*pos_lead, seq), generator=g)
    return RopeCase(randn(g, *lead, seq, d_k), positions, theta, max_seq_len)


# --- attention ----------------------------------------------------------------------
class SDPACase(NamedTuple):
    q: Tensor  # (..., n, d_k)
    k: Tensor  # (..., m, d_k)
    v: Tensor  # (..., m, d_v)
    mask: Tensor  # (..., n, m) bool, broadcasting; every row has a True and a False


def two_sided_mask(g: torch.Generator, shape: tuple[int, ...]) -> Tensor:
    """Random bool mask whose every row (last dim, size ≥ 2) has at least one
    True and one False, so both it and its inverse are valid masks."""
    mask = torch.rand(shape, generator=g) < 0.5
    m = shape[-1]
    on = torch.randint(0, m, (*shape[:-1], 1), generator=g)
    off = (on + torch.randint(1, m, on.shape, generator=g)) % m
    mask.scatter_(-1, on, True)
    return mask.scatter_(-1, off, False)


@st.composite
def sdpa_cases(
    draw: st.DrawFn,
    *,
    lead_dims: tuple[int, ...] = ANY_LEAD,
    contract_masks: bool = False,
    max_side: int = 6,
    max_dk: int = 16,
) -> SDPACase:
    """``contract_masks``: the mask has the scores' full shape or is ``(n, m)``
    (SPEC §2); otherwise any shape that broadcasts over the leading dims."""
    lead = draw(leading_shapes(dims=lead_dims), label="leading dims")
    n = draw(st.integers(1, max_side), label="queries")
    m = draw(st.integers(2, max_side), label="keys")
    d_k = draw(st.integers(1, max_dk), label="d_k")
    d_v = draw(st.integers(1, max_dk), label="d_v")
    if contract_masks:
        mask_lead = draw(st.sampled_from([lead, ()]), label="mask leading dims")
    else:
        mask_lead = draw(broadcast_of(lead), label="mask leading dims")
    sharp = draw(st.sampled_from((1.0, 3.0)), label="query scale")
    g = generator(draw(seeds, label="seed"))
    q = randn(g, *lead, n, d_k, std=sharp)
    k, v = randn(g, *lead, m, d_k), randn(g, *lead, m, d_v)
    return SDPACase(q, k, v, two_sided_mask(g, (*mask_lead, n, m)))


class MHACase(NamedTuple):
    x: Tensor  # (..., seq, d_model)
    q_w: Tensor
    k_w: Tensor
    v_w: Tensor
    o_w: Tensor
    num_heads: int
    theta: float
    max_seq_len: int
    positions: Tensor  # (..., seq), broadcasting


@st.composite
def mha_cases(
    draw: st.DrawFn,
    *,
    lead_dims: tuple[int, ...] = ANY_LEAD,
    contract_positions: bool = False,
    max_heads: int = 4,
    max_dk: int = 8,
) -> MHACase:
    """``contract_positions``: ``token_positions`` is ``(1, seq)`` (the official
    test) or ``(batch, seq)`` (SPEC §2), rows distinct; otherwise any shape
    that broadcasts against ``x``'s leading dims."""
    lead = draw(leading_shapes(dims=lead_dims, max_side=2), label="leading dims")
    heads = draw(st.integers(1, max_heads), label="num_heads")
    d_k = 2 * draw(st.integers(1, max_dk // 2), label="d_k/2")
    d_model = heads * d_k
    seq = draw(st.integers(1, MAX_SEQ), label="seq")
    max_seq_len = draw(st.integers(seq, 4 * MAX_SEQ), label="max_seq_len")
    theta = draw(st.sampled_from(THETAS), label="theta")
    if contract_positions:
        pos_lead = draw(st.sampled_from([lead, (1,)]), label="positions leading dims")
    else:
        pos_lead = draw(broadcast_of(lead), label="positions leading dims")
    g = generator(draw(seeds, label="seed"))
    x = randn(g, *lead, seq, d_model)
    q_w, k_w, v_w, o_w = (weight(g, d_model, d_model) for _ in range(4))
    positions = torch.randint(0, max_seq_len, (*pos_lead, seq), generator=g)
    return MHACase(x, q_w, k_w, v_w, o_w, heads, theta, max_seq_len, positions)


# --- block and LM ---------------------------------------------------------------------
def random_weights(g: torch.Generator, shapes: dict[str, tuple[int, ...]]) -> dict[str, Tensor]:
    """Weights for SPEC §2 state-dict names: gains 1 ± 0.3, embeddings std 1,
    matrices std ``1/sqrt(fan_in)``."""
    out = {}
    for name, shape in shapes.items():
        if len(shape) == 1:
            out[name] = 1.0 + randn(g, *shape, std=0.3)
        elif name.startswith("token_embeddings"):
            out[name] = randn(g, *shape)
        else:
            out[name] = weight(g, *shape)
    return out


class BlockCase(NamedTuple):
    x: Tensor  # (..., seq, d_model)
    weights: dict[str, Tensor]  # SPEC §2 names without "layers.{i}."
    d_model: int
    num_heads: int
    d_ff: int
    max_seq_len: int
    theta: float


@st.composite
def block_cases(
    draw: st.DrawFn, *, lead_dims: tuple[int, ...] = ANY_LEAD, norm: str = "pre", ffn: str = "swiglu"
) -> BlockCase:
    lead = draw(leading_shapes(dims=lead_dims, max_side=2), label="leading dims")
    heads = draw(st.integers(1, 3), label="num_heads")
    d_k = 2 * draw(st.integers(1, 4), label="d_k/2")
    d_model = heads * d_k
    d_ff = draw(st.integers(1, 32), label="d_ff")
    seq = draw(st.integers(1, 8), label="seq")
    max_seq_len = draw(st.integers(seq, 32), label="max_seq_len")
    theta = draw(st.sampled_from(THETAS), label="theta")
    g = generator(draw(seeds, label="seed"))
    weights = random_weights(g, block_weight_shapes(d_model, d_ff, norm=norm, ffn=ffn))
    return BlockCase(randn(g, *lead, seq, d_model), weights, d_model, heads, d_ff, max_seq_len, theta)


@st.composite
def model_configs(
    draw: st.DrawFn,
    *,
    max_vocab: int = 40,
    max_context: int = 8,
    max_layers: int = 2,
    max_heads: int = 3,
    max_dk: int = 6,
) -> ModelConfig:
    heads = draw(st.integers(1, max_heads), label="num_heads")
    d_k = 2 * draw(st.integers(1, max_dk // 2), label="d_k/2")
    return ModelConfig(
        vocab_size=draw(st.integers(2, max_vocab), label="vocab_size"),
        context_length=draw(st.integers(1, max_context), label="context_length"),
        d_model=heads * d_k,
        num_layers=draw(st.integers(1, max_layers), label="num_layers"),
        num_heads=heads,
        d_ff=draw(st.integers(1, 4 * heads * d_k), label="d_ff"),
        rope_theta=draw(st.sampled_from(THETAS), label="rope_theta"),
    )


class LMCase(NamedTuple):
    token_ids: Tensor  # (..., seq) int64, seq ≤ context_length
    weights: dict[str, Tensor]  # SPEC §2 state-dict names
    config: ModelConfig


@st.composite
def lm_cases(
    draw: st.DrawFn,
    *,
    lead_dims: tuple[int, ...] = BATCH,
    norm: str = "pre",
    ffn: str = "swiglu",
    full_context: bool = False,
) -> LMCase:
    """Ids ``(*lead, seq)``; the default ``lead_dims=BATCH`` is the contract's
    ``(batch, seq)``."""
    cfg = draw(model_configs(), label="config")
    lead = draw(leading_shapes(dims=lead_dims, max_side=2), label="leading dims")
    seq = cfg.context_length if full_context else draw(st.integers(1, cfg.context_length), label="seq")
    g = generator(draw(seeds, label="seed"))
    weights = random_weights(g, lm_weight_shapes(cfg, norm=norm, ffn=ffn))
    return LMCase(torch.randint(0, cfg.vocab_size, (*lead, seq), generator=g), weights, cfg)
