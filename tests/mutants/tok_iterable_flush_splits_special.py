"""MUTANT: encode_iterable's flush ignores a special token cut at the end of its buffer."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer
from lmspec.reference.tokenizer.pretokenize import GPT2_REGEX, split_final_pretokens

MUTANT = {
    "spec": "1.3.encode_iterable",
    "bug": (
        "when the buffer is flushed, only the last pre-token is held back: a special token "
        "whose first half ends the buffer is encoded as text"
    ),
    "run": ["1.3.encode_iterable"],
    "strict_only": (
        "a file's lines never end inside a special token (none contains a newline), so only a chunk cut "
        "mid-special-token (STRICT: arbitrary cuts) meets this bug"
    ),
    "hinted": ["a special token cut by a chunk boundary is encoded as ordinary text"],
}


class _Tokenizer(Tokenizer):
    def _encode_final_prefix(self, text, cache):
        ids, start = [], 0
        if self._special_regex is not None:
            for match in self._special_regex.finditer(text):
                ids += self._encode_pretokens(GPT2_REGEX.findall(text, start, match.start()), cache)
                ids.append(self._special_ids[match.group()])
                start = match.end()
        # BUG: no special_prefix_start(): a partial special token at the end is plain text
        pretokens, consumed = split_final_pretokens(text[start:])
        return ids + self._encode_pretokens(pretokens, cache), start + consumed


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
