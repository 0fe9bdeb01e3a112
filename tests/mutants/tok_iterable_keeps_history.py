"""MUTANT: encode_iterable is lazy and exact but keeps every chunk it has read."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.encode_iterable",
    "bug": "every chunk read is kept (a log of the stream): memory grows with the stream length",
    "run": ["1.3.encode_iterable"],
    "strict_only": (
        "SPEC.md makes bounded memory a SHOULD (1.3.encode_iterable.memory): the outputs are exact, "
        "so only the memory check, reported and never scored, can tell"
    ),
    "hinted": ["something proportional to the stream is kept"],
}


class _Tokenizer(Tokenizer):
    def encode_iterable(self, iterable):
        seen = []

        def recording():
            for chunk in iterable:
                seen.append(chunk)
                yield chunk

        yield from super().encode_iterable(recording())


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
