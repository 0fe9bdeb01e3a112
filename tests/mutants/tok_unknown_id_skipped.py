"""MUTANT: decode silently skips ids that are not in the vocabulary."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.decode",
    "bug": "unknown ids skipped (vocab.get(i, b'')) instead of raising",
    "run": ["1.3.decode"],
    "strict_only": (
        "the handout does not say what decode does with an id outside the vocabulary: skipping it is correct "
        "under MUST (raising is STRICT)"
    ),
    "hinted": ["an id outside the vocabulary skipped"],
}


class _Tokenizer(Tokenizer):
    def decode(self, ids):
        return b"".join(self.vocab.get(i, b"") for i in ids).decode("utf-8", errors="replace")


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
