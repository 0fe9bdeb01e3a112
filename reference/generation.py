"""Decoding: temperature, top-p (nucleus) filtering, sampling loop (SPEC §4)."""

from collections.abc import Callable, Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = ["generate", "sample_next_token", "temperature_softmax", "top_p_filter"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def temperature_softmax(
    logits: Float[Tensor, "*batch vocab_size"], temperature: float | int
) -> Float[Tensor, "*batch vocab_size"]:
    """``softmax(v / τ)`` over the last dimension (SPEC §4).

    ``τ == 0`` is greedy: exactly one-hot at the (first) argmax. For tiny
    ``τ > 0`` the max is subtracted before dividing, so the result tends to the
    uniform distribution over the tied maxima instead of overflowing to NaN.
    Half-precision logits are upcast to float32 (so is the result).

    Raises:
        ValueError: ``temperature`` negative or NaN.
    """
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if logits.dtype in _LOW_PRECISION:
        logits = logits.float()
    if temperature == 0:
        onehot = torch.zeros_like(logits)
        return onehot.scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    scaled = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    weights = scaled.exp()
    return weights / weights.sum(dim=-1, keepdim=True)


def top_p_filter(probs: Float[Tensor, "*batch vocab_size"], top_p: float | int) -> Float[Tensor, "*batch vocab_size"]:
    """Nucleus filter (SPEC §4): keep the smallest set of most-probable tokens
    whose total probability is ``>= top_p``, renormalise, zero the rest.

    Tokens are ranked by probability, ties broken by lower token id, and taken
    while the mass of the tokens ranked before them is ``< top_p`` (so the most
    probable token is always kept). ``top_p == 1`` keeps every token (the
    input, renormalised), even where float rounding would drop a tiny tail.
    Batched over leading dimensions; cumulative sums in float64.

    Raises:
        ValueError: ``top_p`` outside (0, 1], or a negative probability.
    """
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if probs.numel() > 0 and bool((probs < 0).any()):
        raise ValueError(f"probabilities must be >= 0, got a minimum of {float(probs.min())}")
    if top_p == 1:
        return probs / probs.sum(dim=-1, keepdim=True)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    mass_before = sorted_probs.double().cumsum(dim=-1) - sorted_probs.double()
    keep_sorted = mass_before < top_p
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)


def sample_next_token(
    logits: Float[Tensor, " vocab_size"],
    temperature: float | int,
    top_p: float | int,
    generator: torch.Generator | None = None,
) -> int:
    """Sample one token id from ``logits``: temperature, then top-p, then a draw.

    ``temperature == 0`` returns the (first) argmax without consuming randomness. The
    draw uses ``generator`` (on its device; the probabilities are moved there)
    or torch's global RNG when None.

    Raises:
        ValueError: ``temperature`` negative, or ``top_p`` outside (0, 1].
    """
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if temperature == 0:
        return int(logits.argmax())
    probs = top_p_filter(temperature_softmax(logits, temperature), top_p)
    if generator is not None:
        probs = probs.to(generator.device)
    return int(torch.multinomial(probs, num_samples=1, generator=generator))


def _context_length_of(model: Callable[[Tensor], Tensor]) -> int:
    config = getattr(model, "config", None)
    context_length = getattr(config, "context_length", None)
    if not isinstance(context_length, int):
        raise ValueError(
            "cannot tell the model's context length: pass context_length=..., or give the "
            "model a `config.context_length` attribute"
        )
    return context_length


def generate(
    model: Callable[[Tensor], Tensor],
    prompt_ids: Sequence[int] | Int[Tensor, " prompt_len"],
    max_new_tokens: int,
    *,
    temperature: float | int = 1.0,
    top_p: float | int = 1.0,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
    context_length: int | None = None,
) -> list[int]:
    """Autoregressively extend ``prompt_ids`` (SPEC §4); return the new tokens only.

    Each step runs ``model`` on the last ``context_length`` tokens (a
    ``(1, seq)`` int64 tensor, on the device of the model's parameters when it
    has any), samples the next token from the final position's logits with
    :func:`sample_next_token`, and appends it. Stops after emitting
    ``eos_token_id`` (included in the result) or after ``max_new_tokens``.
    Runs under ``torch.inference_mode``; the model's train/eval mode is left
    as the caller set it.

    Raises:
        ValueError: empty prompt, negative ``max_new_tokens``, bad ``temperature``
            or ``top_p``, or no way to know the context length.
    """
    prompt = [int(i) for i in prompt_ids.tolist()] if isinstance(prompt_ids, Tensor) else list(prompt_ids)
    if not prompt:
        raise ValueError("prompt_ids must hold at least one token")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if context_length is None:
        context_length = _context_length_of(model)
    if context_length < 1:
        raise ValueError(f"context_length must be >= 1, got {context_length}")
    device = torch.device("cpu")
    if isinstance(model, torch.nn.Module):
        first = next(model.parameters(), None)
        if first is not None:
            device = first.device

    ids = torch.tensor([prompt], dtype=torch.long, device=device)
    new_tokens: list[int] = []
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            logits = model(ids[:, -context_length:])
            next_id = sample_next_token(logits[0, -1].float(), temperature, top_p, generator)
            new_tokens.append(next_id)
            if eos_token_id is not None and next_id == eos_token_id:
                break
            next_tensor = torch.tensor([[next_id]], dtype=torch.long, device=device)
            # only the last context_length tokens are ever read again
            ids = torch.cat([ids, next_tensor], dim=1)[:, -context_length:]
    return new_tokens
