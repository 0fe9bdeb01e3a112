"""MUTANT: encode_iterable encodes every chunk on its own."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.encode_iterable",
    "bug": ("yield from encode(chunk) per chunk: pre-tokens and special tokens spanning chunks are split"),
    "run": ["1.3.encode_iterable"],
    "hinted": ["each chunk encoded on its own"],
    # also_named: its encode_iterable goes through encode, whose pre-token cache (two
    # generations of CACHE_GENERATION_ENTRIES) outgrows the SHOULD memory check's
    # allowance on a stream of new pre-tokens: a second, real finding.
    "also_named": ["a pre-token cache that keeps every distinct pre-token met"],
}


class _Tokenizer(Tokenizer):
    def encode_iterable(self, iterable):
        for chunk in iterable:
            yield from self.encode(chunk)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
