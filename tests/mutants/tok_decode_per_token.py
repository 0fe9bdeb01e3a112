"""MUTANT: decode decodes each token's bytes separately, then joins the strings."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.decode",
    "bug": "each id decoded on its own: a character split over two tokens becomes two U+FFFD",
    "run": ["1.3.decode"],
    "hinted": ["each id's bytes decoded on their own"],
}


class _Tokenizer(Tokenizer):
    def decode(self, ids):
        return "".join(self.vocab[i].decode("utf-8", errors="replace") for i in ids)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
