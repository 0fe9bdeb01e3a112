"""Byte-level BPE tokenizer (SPEC §1): pre-tokenization, training, encoding, files.

Public names:

- ``train_bpe(input_path, vocab_size, special_tokens)`` -> ``(vocab, merges)``;
  ``train_bpe_from_counts`` runs the merge phase alone on pre-token counts.
- ``Tokenizer(vocab, merges, special_tokens)`` with ``encode``, ``encode_iterable``,
  ``decode``, ``from_files`` and ``save`` (GPT-2 file format).
- ``encode_file(tokenizer, input_path, output_path)`` -> ``EncodeStats``: a
  text file to a memory-mappable ``.npy`` of token ids.
- ``gpt2_bytes_to_unicode``: GPT-2's printable byte alphabet of the file format.
"""

import importlib
from typing import Any

# Names are imported on first use: training a tokenizer never loads numpy
# (encode_file's), so ``lmspec train-bpe`` starts in a fraction of a second.
_WHERE = {
    "EncodeStats": "file_encoding",
    "encode_file": "file_encoding",
    "token_dtype": "file_encoding",
    "load_vocab_merges": "files",
    "save_vocab_merges": "files",
    "bytes_to_printable": "gpt2",
    "gpt2_bytes_to_unicode": "gpt2",
    "gpt2_unicode_to_bytes": "gpt2",
    "printable_to_bytes": "gpt2",
    "GPT2_PATTERN": "pretokenize",
    "count_pretokens": "pretokenize",
    "iter_pretokens": "pretokenize",
    "split_on_special_tokens": "pretokenize",
    "Tokenizer": "tokenizer",
    "count_file_pretokens": "counting",
    "train_bpe": "train",
    "train_bpe_from_counts": "train",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = [
    "GPT2_PATTERN",
    "EncodeStats",
    "Tokenizer",
    "bytes_to_printable",
    "count_file_pretokens",
    "count_pretokens",
    "encode_file",
    "gpt2_bytes_to_unicode",
    "gpt2_unicode_to_bytes",
    "iter_pretokens",
    "load_vocab_merges",
    "printable_to_bytes",
    "save_vocab_merges",
    "split_on_special_tokens",
    "token_dtype",
    "train_bpe",
    "train_bpe_from_counts",
]
