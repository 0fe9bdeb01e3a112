"""MUTANT: decode with errors="strict" (malformed UTF-8 raises)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.decode",
    "bug": "bytes.decode('utf-8') without errors='replace': a lone continuation byte raises",
    "run": ["1.3.decode"],
    "hinted": ["without errors='replace'"],
}


class _Tokenizer(Tokenizer):
    def decode(self, ids):
        return b"".join(self.vocab[i] for i in ids).decode("utf-8")


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
