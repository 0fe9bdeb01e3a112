"""Tokenizer items of the adapter interface (SPEC §5, CS336 ``tests/adapters.py`` names)."""

from collections.abc import Sequence
from typing import Any

from lmspec.reference._types import PathLike
from lmspec.reference.tokenizer import Tokenizer, train_bpe

__all__ = ["get_tokenizer", "run_train_bpe"]


def get_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
) -> Tokenizer:
    """A ``Tokenizer`` with ``encode``, ``encode_iterable`` and ``decode`` (SPEC §1.3)."""
    return Tokenizer(vocab, merges, special_tokens)


def run_train_bpe(
    input_path: PathLike,
    vocab_size: int,
    special_tokens: Sequence[str],
    **kwargs: Any,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """``train_bpe`` (SPEC §1.2); extra keywords (``num_workers``, ``progress``) are passed on."""
    return train_bpe(input_path, vocab_size, special_tokens, **kwargs)
