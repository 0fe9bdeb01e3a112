"""MUTANT: decode with errors="ignore" (malformed bytes vanish)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.decode",
    "bug": "errors='ignore' drops malformed bytes instead of writing U+FFFD",
    "run": ["1.3.decode"],
    "hinted": ["errors='ignore'"],
}


class _Tokenizer(Tokenizer):
    def decode(self, ids):
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="ignore")


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
