"""MUTANT: encode ignores special tokens (they go through the GPT-2 pre-tokenizer)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer
from lmspec.reference.tokenizer.pretokenize import GPT2_REGEX

MUTANT = {
    "spec": "1.3.special_tokens",
    "bug": ("encode never splits on special tokens: '<|endoftext|>' becomes '<|', 'endoftext', '|>' ids"),
    "run": ["1.3.special_tokens"],
    "hinted": ["special tokens not split off before pre-tokenization"],
}


class _Tokenizer(Tokenizer):
    def encode(self, text):
        return self._encode_pretokens(GPT2_REGEX.findall(text), self._cache)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
