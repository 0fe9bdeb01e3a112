"""VARIANT: decode writes U+FFFD for an id it does not know instead of
raising. The handout does not say what decode does with such ids, so this is
correct under MUST (raising is a STRICT rule)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

VARIANT = {"what": "decode gives U+FFFD for unknown ids", "run": ["1.3"]}

_REPLACEMENT = "\ufffd".encode()


class _Tokenizer(Tokenizer):
    def decode(self, ids):
        data = bytearray()
        for i in ids:
            data += self.vocab.get(i, _REPLACEMENT)
        return data.decode("utf-8", errors="replace")


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
