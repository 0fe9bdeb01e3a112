"""MUTANT: encode looks special tokens up in the vocabulary as it was given,
so a special token absent from it raises KeyError in encode; encode_iterable
is the reference's own (correct) code.

One bug, one item (issue 19): the bug is the special-token item's, and
encode_iterable, whose rule is relative to encode, must not lose its points
for it. Its tests compare with the implementation's own encode and avoid the
inputs on which that encode raises.
"""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.special_tokens",
    "bug": "encode looks special ids up in the vocabulary as given: KeyError for a special token absent from it",
    "run": ["1.3.encode", "1.3.encode_iterable", "1.3.special_tokens"],
    "costs": ["1.3.special_tokens"],
    "hinted": ["special ids looked up in the vocabulary as given"],
}


class _Tokenizer(Tokenizer):
    def __init__(self, vocab, merges, special_tokens=None):
        super().__init__(vocab, merges, special_tokens)
        self._given = {token: i for i, token in vocab.items()}

    def encode(self, text):
        if self._special_regex is not None:
            for match in self._special_regex.finditer(text):
                self._given[match.group().encode("utf-8")]  # BUG: KeyError when it was not in the given vocab
        return super().encode(text)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
