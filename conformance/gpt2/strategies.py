"""Hypothesis strategies and pinned inputs of the gpt2 suite: small
configurations from the interior of what the book uses (heads dividing the
width, tokens up to the context length, the book's dropout 0.1)."""

from typing import Any, NamedTuple

import torch
from hypothesis import strategies as st

from lmspec.conformance.gpt2 import oracles as o


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *shape: int, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * std + mean


seeds = st.integers(0, 2**31 - 1)


class MHACase(NamedTuple):
    d_in: int
    d_out: int
    heads: int
    context: int
    qkv_bias: bool
    x: torch.Tensor
    weights: dict[str, torch.Tensor]


@st.composite
def mha_cases(draw: Any, *, square: bool | None = None, batch: tuple[int, int] = (1, 3)) -> MHACase:
    heads = draw(st.sampled_from([1, 2, 4]))
    d_out = heads * draw(st.sampled_from([2, 4, 8]))
    d_in = d_out if square else draw(st.sampled_from([4, 6, 8, 12, 16]))
    if square is False and d_in == d_out:
        d_in = d_out + 2
    context = draw(st.integers(4, 12))
    tokens = draw(st.integers(2, context))
    qkv_bias = draw(st.booleans())
    g = generator(draw(seeds))
    x = randn(g, draw(st.integers(*batch)), tokens, d_in)
    return MHACase(d_in, d_out, heads, context, qkv_bias, x, o.mha_weights(g, d_in, d_out, qkv_bias))


def fixed_mha(seed: int, d_in: int, d_out: int, heads: int, context: int, tokens: int, batch: int, qkv_bias: bool):
    """A pinned MHA case (a test's second input)."""
    g = generator(seed)
    x = randn(g, batch, tokens, d_in)
    return MHACase(d_in, d_out, heads, context, qkv_bias, x, o.mha_weights(g, d_in, d_out, qkv_bias))


class ModelCase(NamedTuple):
    cfg: dict[str, Any]
    weights: dict[str, torch.Tensor]
    ids: torch.Tensor


@st.composite
def model_cases(draw: Any, *, drop: float = 0.1, batch: tuple[int, int] = (1, 3), layers: tuple[int, int] = (1, 2)):
    heads = draw(st.sampled_from([1, 2, 4]))
    # at least 4 wide: a LayerNorm over 2 values keeps only their order, which
    # hides what positions and weights did (and lets unrelated hints match)
    emb = max(4, heads * draw(st.sampled_from([2, 4])))
    c = o.cfg(
        vocab=draw(st.integers(16, 64)),
        context=draw(st.integers(4, 10)),
        emb=emb,
        heads=heads,
        layers=draw(st.integers(*layers)),
        drop=drop,
        qkv_bias=draw(st.booleans()),
    )
    g = generator(draw(seeds))
    tokens = draw(st.integers(1, c["context_length"]))
    ids = torch.randint(0, c["vocab_size"], (draw(st.integers(*batch)), tokens), generator=g)
    return ModelCase(c, o.model_weights(g, c), ids)


def fixed_model(seed: int = 0, tokens: int | None = None, **kw: Any) -> ModelCase:
    """A pinned model case: two rows of ``tokens`` ids (default context_length)."""
    c = o.cfg(**kw)
    g = generator(seed)
    ids = torch.randint(0, c["vocab_size"], (2, tokens or c["context_length"]), generator=g)
    return ModelCase(c, o.model_weights(g, c), ids)


def budget(n: int) -> Any:
    """``n`` examples for a test whose every example builds models in the worker,
    unless a larger Hypothesis profile (thorough, --max-examples) asks for more."""
    from hypothesis import settings

    chosen = settings.default.max_examples
    return settings(max_examples=n if chosen <= 25 else chosen)
