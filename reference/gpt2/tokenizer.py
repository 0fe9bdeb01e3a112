"""GPT-2's encoding for tiktoken without a download: built from the GPT-2
vocabulary file (its ids are the merge ranks) and registered under the
name the book asks for, ``tiktoken.get_encoding("gpt2")``."""

import json
from pathlib import Path
from typing import Any

from lmspec.reference.tokenizer.gpt2 import gpt2_unicode_to_bytes

END_OF_TEXT = "<|endoftext|>"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def gpt2_encoding(vocab_path: str | Path) -> Any:
    """A ``tiktoken.Encoding`` equal to tiktoken's "gpt2", from ``vocab.json``."""
    import tiktoken

    to_byte = gpt2_unicode_to_bytes()
    vocab = json.loads(Path(vocab_path).read_text(encoding="utf-8"))
    ranks = {bytes(to_byte[c] for c in token): i for token, i in vocab.items() if token != END_OF_TEXT}
    return tiktoken.Encoding(
        "gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={END_OF_TEXT: vocab[END_OF_TEXT]}
    )


def register_offline_gpt2(vocab_path: str | Path) -> Any:
    """Make ``tiktoken.get_encoding("gpt2")`` return the encoding built from ``vocab_path``."""
    import tiktoken.registry

    encoding = gpt2_encoding(vocab_path)
    tiktoken.registry.ENCODINGS["gpt2"] = encoding
    return encoding
