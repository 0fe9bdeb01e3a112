"""MUTANT: encode_iterable is lazy and exact but memoizes every pre-token it
meets in a dict that is never trimmed (``functools.cache`` on the BPE step is
the same bug)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.encode_iterable",
    "bug": "unbounded pre-token cache: memory grows with the distinct pre-tokens, hence the stream length",
    "run": ["1.3.encode_iterable"],
    "strict_only": (
        "SPEC.md makes bounded memory a SHOULD (1.3.encode_iterable.memory): the outputs are exact, "
        "so only the memory check, reported and never scored, can tell"
    ),
    "hinted": ["a pre-token cache that keeps every distinct pre-token met"],
}


class _Tokenizer(Tokenizer):
    def encode_iterable(self, iterable):
        yield from super().encode_iterable(iterable, cache_entries=1 << 40)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
