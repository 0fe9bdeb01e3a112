"""MUTANT: encode_iterable joins the whole input before encoding."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.encode_iterable",
    "bug": "yield from encode(''.join(iterable)): correct ids, but reads the whole stream first",
    "run": ["1.3.encode_iterable"],
    "hinted": ["the whole iterable read before the first id is yielded"],
    # also_named: joining the whole stream keeps its text: the SHOULD memory
    # check's finding is this bug seen through memory.
    "also_named": ["something proportional to the stream is kept"],
}


class _Tokenizer(Tokenizer):
    def encode_iterable(self, iterable):
        yield from self.encode("".join(iterable))


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
