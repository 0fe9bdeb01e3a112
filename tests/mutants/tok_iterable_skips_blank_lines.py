"""MUTANT: encode_iterable skips whitespace-only lines (``if not line.strip(): continue``)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.encode_iterable",
    "bug": "blank and whitespace-only lines of the stream are skipped, so their newlines never get ids",
    "run": ["1.3.encode_iterable"],
    "hinted": ["whitespace-only chunks (blank lines) are skipped"],
}


class _Tokenizer(Tokenizer):
    def encode_iterable(self, iterable):
        yield from super().encode_iterable(line for line in iterable if line.strip())


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
