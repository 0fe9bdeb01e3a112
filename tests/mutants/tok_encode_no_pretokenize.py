"""MUTANT: encode runs BPE over whole special-free segments (no GPT-2 pre-tokenization)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.1.pretokenize",
    "bug": "encode skips the GPT-2 pattern, so merges apply across pre-token boundaries",
    "run": ["1.1.pretokenize", "1.3.encode"],
    "hinted": ["no GPT-2 pre-tokenization: merges applied across pre-token boundaries"],
}


class _Tokenizer(Tokenizer):
    def encode(self, text):
        ids = []
        for piece, special in self._split(text):
            ids += [self._special_ids[piece]] if special else self._encode_pretokens([piece], self._cache)
        return ids

    def _split(self, text):
        if self._special_regex is None:
            return [(text, False)] if text else []
        out, start = [], 0
        for m in self._special_regex.finditer(text):
            if m.start() > start:
                out.append((text[start : m.start()], False))
            out.append((m.group(), True))
            start = m.end()
        if start < len(text):
            out.append((text[start:], False))
        return out


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
