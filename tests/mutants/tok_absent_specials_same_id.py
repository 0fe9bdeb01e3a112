"""MUTANT: every absent special token gets the same "next free id"."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.special_tokens",
    "bug": "next free id computed once (len(vocab)) and given to every absent special token",
    "run": ["1.3.special_tokens"],
    "hinted": ["the next free id computed once"],
}


class _Tokenizer(Tokenizer):
    def __init__(self, vocab, merges, special_tokens=None):
        super().__init__(vocab, merges, special_tokens)
        nxt = max(vocab) + 1
        for s in self.special_tokens:
            if s.encode("utf-8") not in set(vocab.values()):
                self._special_ids[s] = nxt  # BUG: never incremented
                self.vocab[nxt] = s.encode("utf-8")


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
