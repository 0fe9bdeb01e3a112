"""MUTANT: decode looks ids up in a list, so -1 silently means the last token."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.decode",
    "bug": "vocab held as a list: a negative id wraps around instead of raising",
    "run": ["1.3.decode"],
    "strict_only": (
        "the handout does not say what decode does with an id outside the vocabulary (-1 included): a "
        "wrap-around is correct under MUST (raising is STRICT)"
    ),
    "hinted": ["a negative id wraps around"],
}


class _Tokenizer(Tokenizer):
    def __init__(self, vocab, merges, special_tokens=None):
        super().__init__(vocab, merges, special_tokens)
        self._table = [self.vocab[i] for i in range(len(self.vocab))]

    def decode(self, ids):
        return b"".join(self._table[i] for i in ids).decode("utf-8", errors="replace")


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
