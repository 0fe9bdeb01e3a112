"""The learning-rate rule, label smoothing and the teacher-forcing loss (SPEC §6.2)."""

import torch
from jaxtyping import Float, Integer
from torch import Tensor

from lmspec.reference.encdec.conventions import PAPER, Conventions
from lmspec.reference.encdec.layers import source_mask, target_mask
from lmspec.reference.encdec.model import EncoderDecoder


def rate(step: int, d_model: int, factor: float, warmup: int) -> float:
    """``factor · d_model^−0.5 · min(step^−0.5, step · warmup^−1.5)``, step 0 taken as 1
    (the rule is undefined there: 0^−0.5; the annotated notes' scheduler starts there)."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def smoothed_targets(
    target: Integer[Tensor, " rows"], vocab: int, smoothing: float, pad_id: int, variant: str, dtype: torch.dtype
) -> Float[Tensor, "rows vocab"]:
    """The target distribution q per row. ``"annotated"``: ``1 − ε`` on the true
    class, ``ε / (V − 2)`` on every other class but the padding class (0 there);
    ``"torch"``: ``(1 − ε)·onehot + ε / V`` on every class; ``"others"``: ``1 − ε``
    on the true class, ``ε / (V − 1)`` on every other class."""
    if variant == "annotated":
        if vocab <= 2:
            raise ValueError(f"annotated label smoothing needs more than 2 classes, got {vocab}")
        q = torch.full((target.shape[0], vocab), smoothing / (vocab - 2), dtype=dtype, device=target.device)
        q[:, pad_id] = 0.0
        q.scatter_(1, target.unsqueeze(1), 1.0 - smoothing)
        return q
    if variant == "torch":
        q = torch.full((target.shape[0], vocab), smoothing / vocab, dtype=dtype, device=target.device)
        return q.scatter_add_(1, target.unsqueeze(1), torch.full_like(q[:, :1], 1.0 - smoothing))
    if variant == "others":
        q = torch.full((target.shape[0], vocab), smoothing / (vocab - 1), dtype=dtype, device=target.device)
        return q.scatter_(1, target.unsqueeze(1), 1.0 - smoothing)
    raise ValueError(f"label smoothing variant {variant!r}: expected 'annotated', 'torch' or 'others'")


def label_smoothing_loss(
    logits: Float[Tensor, "... vocab"],
    target: Integer[Tensor, "..."],
    smoothing: float,
    pad_id: int,
    conventions: Conventions = PAPER,
) -> Float[Tensor, ""]:
    """Mean over the rows whose target is not ``pad_id`` of ``−Σ_c q_c log p_c``
    (``"cross_entropy"``) or ``Σ_c q_c (log q_c − log p_c)`` (``"kl"``, 0 log 0 = 0),
    ``p = softmax(logits)``, ``q`` from ``smoothed_targets``. Log-probabilities
    may be given for ``logits``: the log-softmax of a log-softmax is itself."""
    vocab = logits.shape[-1]
    flat = logits.reshape(-1, vocab)
    target = target.reshape(-1)
    log_p = flat - torch.logsumexp(flat, dim=-1, keepdim=True)
    keep = target != pad_id
    log_p, target = log_p[keep], target[keep]
    q = smoothed_targets(target, vocab, smoothing, pad_id, conventions.label_smoothing, log_p.dtype)
    per_row = -(q * log_p).sum(dim=-1)
    if conventions.smoothing_loss == "kl":
        per_row = per_row + torch.xlogy(q, q).sum(dim=-1)
    return per_row.sum() / keep.sum().clamp_min(1)


def teacher_forcing_loss(
    model: EncoderDecoder,
    src: Integer[Tensor, "batch src_len"],
    tgt: Integer[Tensor, "batch tgt_len"],
    pad_id: int,
    smoothing: float = 0.0,
) -> Float[Tensor, ""]:
    """The decoder reads ``tgt[:, :-1]`` and is scored against ``tgt[:, 1:]``;
    padding target positions are ignored."""
    src_mask = source_mask(src, pad_id)
    inputs, labels = tgt[:, :-1], tgt[:, 1:]
    out = model(src, inputs, src_mask, target_mask(inputs, pad_id))
    return label_smoothing_loss(out, labels, smoothing, pad_id, model.conventions)
