"""What a smoke run measures its model against: a corpus every Python
installation ships, the best unigram model of the same tokens, and exact
equality of two runs' states."""

import platform
from pathlib import Path
from typing import Any


def write_corpus(path: Path, separator: str = "<|endoftext|>") -> str:
    """Write the smoke corpus to ``path``; return a one-line description of it.

    Python's own documentation topics (``pydoc_data.topics``, 79 documents,
    467 KB in 3.11), one document per topic, joined with ``separator``:
    real English that every Python installation ships, so the run is the same
    everywhere. (The oracle fixtures were measured as an alternative and
    rejected: corpus.en + tinystories_sample.txt is 3.5x smaller and its
    validation tail is another domain; the model overfits to val 5.56 vs a
    unigram 6.15.)
    """
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    path.write_text(separator.join(topics[k] for k in sorted(topics)), encoding="utf-8")
    return f"pydoc_data.topics of Python {platform.python_version()} ({len(topics)} documents)"


def unigram_cross_entropy(train: Any, val: Any, vocab_size: int) -> float:
    """Cross-entropy (nats/token) on ``val`` of the unigram model fitted on ``train``
    with add-one (Laplace) smoothing: ``p(i) = (count_i + 1) / (N + V)``."""
    import numpy as np

    counts = np.bincount(np.asarray(train), minlength=vocab_size).astype(np.float64)
    log_p = np.log((counts + 1.0) / (counts.sum() + vocab_size))
    return float(-log_p[np.asarray(val)].mean())


def same_state(a: Any, b: Any) -> bool:
    """Exact equality of nested state (tensors compared bitwise)."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    return a == b
