"""MUTANT: the tokenizer cannot be built with an empty merge list."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.encode",
    "bug": "merges unpacked with zip(*merges), which raises ValueError when merges == [] (vocab_size = 256 + specials)",
    "run": ["1.3.encode"],
    "hinted": ["an empty merge list is not supported"],
}


class _Tokenizer(Tokenizer):
    def __init__(self, vocab, merges, special_tokens=None):
        lefts, rights = zip(*merges)  # BUG: not enough values to unpack when there is no merge
        super().__init__(vocab, list(zip(lefts, rights)), special_tokens)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
