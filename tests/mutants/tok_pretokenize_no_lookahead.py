"""MUTANT: pre-tokenization pattern without the `\\s+(?!\\S)` alternative."""

import regex

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.1.pretokenize",
    "bug": ("GPT-2 pattern missing \\s+(?!\\S): 'a  b' gives 'a', '  ', 'b' instead of 'a', ' ', ' b'"),
    "run": ["1.1.pretokenize", "1.3.encode"],
    "hinted": ["the last space of a run must start the next word"],
}

_PATTERN = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+""")


class _Tokenizer(Tokenizer):
    def encode(self, text):
        ids, start = [], 0
        if self._special_regex is not None:
            for m in self._special_regex.finditer(text):
                ids += self._encode_pretokens(_PATTERN.findall(text, start, m.start()), self._cache)
                ids.append(self._special_ids[m.group()])
                start = m.end()
        return ids + self._encode_pretokens(_PATTERN.findall(text, start), self._cache)


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
