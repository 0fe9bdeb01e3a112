"""Adapter functions for SPEC §3 (training) and §4 (generation).

Core profile: the CS336 2025 ``tests/adapters.py`` names and signatures
(annotations widened where the CS336 ones are narrower than the spec: any
leading dims for cross-entropy, ints accepted where floats are, binary file
objects as ``io.IOBase``). Extended profile: perplexity and generation, with
the signatures of docs/CONTRIBUTING-suite.md.
"""

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt
import torch
from jaxtyping import Float, Int
from torch import Tensor

from lmspec.reference.generation import generate, sample_next_token, temperature_softmax, top_p_filter
from lmspec.reference.training.checkpoint import CheckpointSource, load_checkpoint, save_checkpoint
from lmspec.reference.training.clipping import clip_grad_norm
from lmspec.reference.training.data import get_batch
from lmspec.reference.training.loss import cross_entropy, perplexity
from lmspec.reference.training.optimizer import AdamW
from lmspec.reference.training.schedule import cosine_lr

__all__ = [
    "get_adamw_cls",
    "run_cross_entropy",
    "run_generate",
    "run_get_batch",
    "run_get_lr_cosine_schedule",
    "run_gradient_clipping",
    "run_load_checkpoint",
    "run_perplexity",
    "run_sample_next_token",
    "run_save_checkpoint",
    "run_temperature_softmax",
    "run_top_p_filter",
]


# --- core profile (CS336 2025) ------------------------------------------------


def run_get_batch(
    dataset: npt.NDArray[np.integer],
    batch_size: int,
    context_length: int,
    device: str | torch.device,
) -> tuple[Tensor, Tensor]:
    """Random (inputs, targets) windows of ``dataset`` on ``device`` (SPEC §3 get_batch)."""
    return get_batch(dataset, batch_size, context_length, device)


def run_cross_entropy(inputs: Float[Tensor, "*batch vocab_size"], targets: Int[Tensor, "*batch"]) -> Float[Tensor, ""]:
    """Mean cross-entropy of logits ``inputs`` against ``targets`` (SPEC §3)."""
    return cross_entropy(inputs, targets)


def run_gradient_clipping(parameters: Iterable[Tensor], max_l2_norm: float | int) -> None:
    """Clip the global gradient L2 norm of ``parameters`` to ``max_l2_norm`` in place."""
    clip_grad_norm(parameters, max_l2_norm)


def get_adamw_cls() -> type[torch.optim.Optimizer]:
    """The reference AdamW class (SPEC §3)."""
    return AdamW


def run_get_lr_cosine_schedule(
    it: int,
    max_learning_rate: float | int,
    min_learning_rate: float | int,
    warmup_iters: int,
    cosine_cycle_iters: int,
) -> float:
    """Cosine schedule with linear warmup at iteration ``it`` (SPEC §3)."""
    return cosine_lr(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)


def run_save_checkpoint(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    out: CheckpointSource,
) -> None:
    """Save model, optimizer and iteration to a path or binary file (SPEC §3)."""
    save_checkpoint(model, optimizer, iteration, out)


def run_load_checkpoint(src: CheckpointSource, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Restore model and optimizer from ``src``; return the saved iteration (SPEC §3)."""
    return load_checkpoint(src, model, optimizer)


# --- extended profile (lmspec) ------------------------------------------------


def run_perplexity(inputs: Float[Tensor, "*batch vocab_size"], targets: Int[Tensor, "*batch"]) -> Float[Tensor, ""]:
    """``exp(mean cross-entropy)`` (SPEC §3 perplexity)."""
    return perplexity(inputs, targets)


def run_temperature_softmax(
    logits: Float[Tensor, "*batch vocab_size"], temperature: float | int
) -> Float[Tensor, "*batch vocab_size"]:
    """Probabilities ``softmax(logits / temperature)``; temperature 0 gives one-hot argmax."""
    return temperature_softmax(logits, temperature)


def run_top_p_filter(
    probs: Float[Tensor, "*batch vocab_size"], top_p: float | int
) -> Float[Tensor, "*batch vocab_size"]:
    """Nucleus filter over the last dim: smallest top set with mass >= top_p, renormalised."""
    return top_p_filter(probs, top_p)


def run_sample_next_token(
    logits: Float[Tensor, " vocab_size"],
    temperature: float | int,
    top_p: float | int,
    generator: torch.Generator | None,
) -> int:
    """One token id sampled from ``logits`` with temperature and top-p (SPEC §4)."""
    return sample_next_token(logits, temperature, top_p, generator)


def run_generate(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
    rope_theta: float | int,
    weights: Mapping[str, Tensor],
    prompt: list[int],
    max_new_tokens: int,
    temperature: float | int,
    top_p: float | int,
    eos_token_id: int | None,
    generator: torch.Generator | None,
) -> list[int]:
    """Build the reference TransformerLM from ``weights`` and generate (SPEC §4).

    Returns the new tokens only; stops after ``eos_token_id`` (included) or
    ``max_new_tokens``. The model runs on the device of the weights.
    """
    # lazy: reference.nn is only needed here, and importing it pulls in the whole model
    from lmspec.reference.nn import ModelConfig, TransformerLM, load_weights

    config = ModelConfig(
        vocab_size=vocab_size,
        context_length=context_length,
        d_model=d_model,
        num_layers=num_layers,
        num_heads=num_heads,
        d_ff=d_ff,
        rope_theta=float(rope_theta),
    )
    first = next(iter(weights.values()), None)
    device = first.device if first is not None else torch.device("cpu")
    model = TransformerLM(config, device=device)
    load_weights(model, weights)
    model.eval()
    return generate(
        model,
        prompt,
        max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        eos_token_id=eos_token_id,
        generator=generator,
    )
