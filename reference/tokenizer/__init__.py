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

from lmspec.reference.tokenizer.encode_file import EncodeStats, encode_file, token_dtype
from lmspec.reference.tokenizer.files import load_vocab_merges, save_vocab_merges
from lmspec.reference.tokenizer.gpt2 import (
    bytes_to_printable,
    gpt2_bytes_to_unicode,
    gpt2_unicode_to_bytes,
    printable_to_bytes,
)
from lmspec.reference.tokenizer.pretokenize import (
    GPT2_PATTERN,
    count_pretokens,
    iter_pretokens,
    split_on_special_tokens,
)
from lmspec.reference.tokenizer.tokenizer import Tokenizer
from lmspec.reference.tokenizer.train import count_file_pretokens, train_bpe, train_bpe_from_counts

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
