"""MUTANT: overlapping special tokens matched shortest first."""

import regex

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.special_tokens",
    "bug": ("special-token alternation sorted shortest first: '<|endoftext|><|endoftext|>' splits in two"),
    "run": ["1.3.special_tokens"],
    "hinted": ["shorter special token matched first"],
}


class _Tokenizer(Tokenizer):
    def __init__(self, vocab, merges, special_tokens=None):
        super().__init__(vocab, merges, special_tokens)
        if self.special_tokens:
            ordered = sorted(self.special_tokens, key=len)  # BUG: shortest first
            self._special_regex = regex.compile("|".join(regex.escape(s) for s in ordered))


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
