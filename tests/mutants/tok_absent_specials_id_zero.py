"""MUTANT: a special token absent from the vocabulary is mapped to id 0."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.special_tokens",
    "bug": "special ids looked up with token_to_id.get(token, 0): an absent special token becomes id 0 (a byte)",
    "run": ["1.3.special_tokens"],
    "hinted": ["looked up with a default (token_to_id.get(token, 0))"],
}


class _Tokenizer(Tokenizer):
    def __init__(self, vocab, merges, special_tokens=None):
        super().__init__(vocab, merges, special_tokens)
        given = {v: k for k, v in vocab.items()}
        for s in self.special_tokens:
            self._special_ids[s] = given.get(s.encode("utf-8"), 0)  # BUG: never added


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
