"""MUTANT: encode_iterable forgets the text still buffered when the stream ends."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer
from lmspec.reference.tokenizer.pretokenize import GPT2_REGEX

MUTANT = {
    "spec": "1.3.encode_iterable",
    "bug": ("holds back the last pre-token of the buffer for the next chunk, and never flushes it at the end"),
    "run": ["1.3.encode_iterable"],
    "hinted": ["the end of the stream is never encoded"],
    # also_named: its encode_iterable goes through encode, whose pre-token cache (two
    # generations of CACHE_GENERATION_ENTRIES) outgrows the SHOULD memory check's
    # allowance on a stream of new pre-tokens: a second, real finding.
    "also_named": ["a pre-token cache that keeps every distinct pre-token met"],
}


class _Tokenizer(Tokenizer):
    def encode_iterable(self, iterable):
        buffer = ""
        for chunk in iterable:
            buffer += chunk
            cut = self._last_boundary(buffer)
            if cut:
                yield from self.encode(buffer[:cut])
                buffer = buffer[cut:]
        # BUG: missing `yield from self.encode(buffer)`

    def _last_boundary(self, text):
        # Start of the last pre-token after the last newline: lines are final.
        nl = text.rfind("\n")
        if nl < 0 or nl + 1 == len(text):
            return 0
        starts = [m.start() for m in GPT2_REGEX.finditer(text)]
        return max((s for s in starts if s > nl), default=0)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
