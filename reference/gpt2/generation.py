"""Greedy and sampled generation (SPEC §6.1 "generate_text_simple", "generate")."""

import torch
from jaxtyping import Integer
from torch import Tensor, nn

from lmspec.reference.nn.softmax import softmax


def _last_logits(model: nn.Module, idx: Tensor, context_size: int) -> Tensor:
    with torch.no_grad():
        return model(idx[:, -context_size:])[:, -1, :]


def generate_text_simple(
    model: nn.Module, idx: Integer[Tensor, "batch tokens"], max_new_tokens: int, context_size: int
) -> Integer[Tensor, "batch more_tokens"]:
    """Append ``max_new_tokens`` greedy ids to every row: the model sees the
    last ``context_size`` ids, the argmax of its last position is appended."""
    for _ in range(max_new_tokens):
        next_id = _last_logits(model, idx, context_size).argmax(dim=-1, keepdim=True)
        idx = torch.cat((idx, next_id), dim=1)
    return idx


def keep_top_k(logits: Tensor, top_k: int) -> Tensor:
    """Every logit strictly below its row's k-th largest set to −inf (ties
    with the k-th largest are kept, as the book's ``<`` comparison keeps them)."""
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def generate(
    model: nn.Module,
    idx: Integer[Tensor, "batch tokens"],
    max_new_tokens: int,
    context_size: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    eos_id: int | None = None,
) -> Integer[Tensor, "batch more_tokens"]:
    """Up to ``max_new_tokens`` new ids: optional top-k filtering, then
    ``temperature > 0``: sample from ``softmax(logits / temperature)`` (torch's
    global generator); otherwise argmax. Generation stops, without appending
    it, when the next id is ``eos_id`` (for a batch: when it is every row's)."""
    for _ in range(max_new_tokens):
        logits = _last_logits(model, idx, context_size)
        if top_k is not None:
            logits = keep_top_k(logits, top_k)
        if temperature > 0.0:
            next_id = torch.multinomial(softmax(logits / temperature, dim=-1), num_samples=1)
        else:
            next_id = logits.argmax(dim=-1, keepdim=True)
        if eos_id is not None and bool((next_id == eos_id).all()):
            break
        idx = torch.cat((idx, next_id), dim=1)
    return idx
