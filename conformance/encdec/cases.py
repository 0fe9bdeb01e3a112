"""Weights and inputs for the encdec tests: seeded, small, from the interior
of the contract (d_model 8 to 32, 1 to 4 heads, source and target lengths
that differ, padding only at the end of a sequence, position 0 of a target
never padding).

Weights are drawn with a spread that keeps every sublayer's contribution
visible after a LayerNorm (so a bug in one sublayer is not hidden by the
normalisation), and norm gains and biases away from 1 and 0 (so a norm in
the wrong place shows).
"""

from typing import NamedTuple

import torch
from torch import Tensor

from lmspec.conformance.tolerances import Tolerance

PAD = 0
START = 1
END = 2


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *shape: int, std: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=g) * std


def linear(g: torch.Generator, prefix: str, d_in: int, d_out: int) -> dict[str, Tensor]:
    return {f"{prefix}weight": randn(g, d_out, d_in, std=d_in**-0.5), f"{prefix}bias": randn(g, d_out, std=0.2)}


def mha_weights(g: torch.Generator, d_model: int, prefix: str = "") -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        out.update(linear(g, f"{prefix}{name}.", d_model, d_model))
    # larger query/key weights: attention that is far from uniform
    for name in ("q_proj", "k_proj"):
        out[f"{prefix}{name}.weight"] = out[f"{prefix}{name}.weight"] * 2.0
    return out


def ffn_weights(g: torch.Generator, d_model: int, d_ff: int, prefix: str = "") -> dict[str, Tensor]:
    return {**linear(g, f"{prefix}fc1.", d_model, d_ff), **linear(g, f"{prefix}fc2.", d_ff, d_model)}


def norm_weights(g: torch.Generator, d_model: int, prefix: str = "") -> dict[str, Tensor]:
    return {f"{prefix}weight": 1.0 + randn(g, d_model, std=0.3), f"{prefix}bias": randn(g, d_model, std=0.3)}


def encoder_layer_weights(g: torch.Generator, d_model: int, d_ff: int, prefix: str = "") -> dict[str, Tensor]:
    return {
        **mha_weights(g, d_model, f"{prefix}self_attn."),
        **ffn_weights(g, d_model, d_ff, f"{prefix}ffn."),
        **norm_weights(g, d_model, f"{prefix}norm1."),
        **norm_weights(g, d_model, f"{prefix}norm2."),
    }


def decoder_layer_weights(g: torch.Generator, d_model: int, d_ff: int, prefix: str = "") -> dict[str, Tensor]:
    return {
        **mha_weights(g, d_model, f"{prefix}self_attn."),
        **mha_weights(g, d_model, f"{prefix}cross_attn."),
        **ffn_weights(g, d_model, d_ff, f"{prefix}ffn."),
        **norm_weights(g, d_model, f"{prefix}norm1."),
        **norm_weights(g, d_model, f"{prefix}norm2."),
        **norm_weights(g, d_model, f"{prefix}norm3."),
    }


class Sizes(NamedTuple):
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int

    def kwargs(self) -> dict[str, int]:
        return self._asdict()


def model_weights(g: torch.Generator, sizes: Sizes, pre_norm: bool) -> dict[str, Tensor]:
    d, ff = sizes.d_model, sizes.d_ff
    # embeddings of std d^-1/2: after × sqrt(d) they are as large as the positions
    out = {
        "src_embed.weight": randn(g, sizes.src_vocab_size, d, std=d**-0.5),
        "tgt_embed.weight": randn(g, sizes.tgt_vocab_size, d, std=d**-0.5),
        "generator.weight": randn(g, sizes.tgt_vocab_size, d, std=d**-0.5),
    }
    for i in range(sizes.num_layers):
        out.update(encoder_layer_weights(g, d, ff, f"encoder.layers.{i}."))
        out.update(decoder_layer_weights(g, d, ff, f"decoder.layers.{i}."))
    if pre_norm:
        out.update(norm_weights(g, d, "encoder.norm."))
        out.update(norm_weights(g, d, "decoder.norm."))
    return out


def tokens(g: torch.Generator, lengths: list[int], width: int, vocab: int, *, start: bool = False) -> Tensor:
    """A (batch, width) id tensor, row r real for its first lengths[r] positions
    (ids in [3, vocab): never PAD, START or END) and PAD after; ``start`` puts
    START at position 0."""
    ids = torch.randint(3, vocab, (len(lengths), width), generator=g)
    for r, n in enumerate(lengths):
        ids[r, n:] = PAD
    if start:
        ids[:, 0] = START
    return ids


def source_mask(src: Tensor) -> Tensor:
    return (src != PAD).unsqueeze(-2)


def target_mask(tgt: Tensor) -> Tensor:
    n = tgt.shape[-1]
    return (tgt != PAD).unsqueeze(-2) & torch.ones(n, n, dtype=torch.bool).tril()


def _clone(x):
    if isinstance(x, Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def fresh(*values):
    """Fresh copies of every argument: an implementation that mutates its
    inputs can neither corrupt the oracle's copy nor be failed for it."""
    return tuple(_clone(v) for v in values)


# --- tolerances (float32 implementation vs float64 oracle) -----------------------------------------
# Measured on the reference (float32) against the oracles over the tests' own
# cases: formulas ≤ 3e-8 (positions), 3e-7 (LayerNorm); attention and layers
# ≤ 1.5e-6; the model (2 layers each side) ≤ 6.5e-6. Each bound is many times
# that, and far below what any bug of the mutant catalogue changes (≥ 1e-2).
TOL_FORMULA = Tolerance(1e-5, 1e-5, "float32 formula vs float64")
TOL_LAYER = Tolerance(1e-4, 1e-4, "one float32 layer vs float64")
TOL_MODEL = Tolerance(5e-4, 5e-4, "a float32 model of 2+2 layers vs float64")
TOL_SCALAR = Tolerance(1e-5, 1e-5, "a float32 loss vs float64")
# rates are 1e-7 (step 1 of a long warmup) to 1e-3: an absolute bound of 1e-5
# would pass any rate there (0 included), so the bound is relative
TOL_RATE = Tolerance(1e-12, 1e-5, "a float32 or float64 rate vs float64, relative")
# checkpointing: one float32 implementation against itself, with and without
# recomputation (bitwise equal on the reference's CPU runs; the bound allows a
# recomputed forward whose float32 sums are reordered, far below a lost gradient)
TOL_SAME = Tolerance(1e-5, 1e-5, "the same float32 layer with and without checkpointing")
