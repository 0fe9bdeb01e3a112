"""VARIANT: a student-style tokenizer written from the handout alone.

Training numbers the 256 bytes 0..255, then the merged tokens 256.. in merge
order, and appends the special tokens last. The tokenizer takes any
vocabulary, looks ranks up by byte pairs, appends absent special tokens after
the vocabulary in its own order (longest first, the order its regex uses), and
streams by pre-tokens: after each chunk it emits everything but the last two
pre-tokens of the buffer. That is exact on a file's lines; a chunk cut inside
a special token is beyond it (a STRICT rule, not the course's contract).
"""

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path

import regex

VARIANT = {"what": "special tokens appended after the merges, student-style tokenizer", "run": ["1"]}

PAT = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def _special_pattern(special_tokens):
    ordered = sorted(set(special_tokens), key=len, reverse=True)
    return re.compile("(" + "|".join(re.escape(s) for s in ordered) + ")") if ordered else None


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    text = Path(input_path).read_text(encoding="utf-8")
    splitter = _special_pattern(special_tokens)
    docs = splitter.split(text)[::2] if splitter else [text]  # odd items are the specials
    counts = Counter(m.group().encode("utf-8") for doc in docs for m in PAT.finditer(doc))

    words = [[bytes([b]) for b in w] for w in counts]
    freq = list(counts.values())
    pairs = Counter()
    where = defaultdict(set)
    for wi, w in enumerate(words):
        for p in pairwise(w):
            pairs[p] += freq[wi]
            where[p].add(wi)

    merges = []
    while len(merges) < vocab_size - 256 - len(special_tokens):
        live = [(c, p) for p, c in pairs.items() if c > 0]
        if not live:
            break
        _, best = max(live)
        merges.append(best)
        joined = best[0] + best[1]
        for wi in list(where[best]):
            w, f = words[wi], freq[wi]
            for p in pairwise(w):
                pairs[p] -= f
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
            for p in pairwise(out):
                pairs[p] += f
                where[p].add(wi)

    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in merges:
        vocab[len(vocab)] = a + b
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    return vocab, merges


class StudentTokenizer:
    def __init__(self, vocab, merges, special_tokens=None):
        self.vocab = dict(vocab)
        self.rank = {}
        for r, pair in enumerate(merges):
            self.rank.setdefault(tuple(pair), r)
        self.specials = sorted(set(special_tokens or []), key=len, reverse=True)
        next_id = max(self.vocab) + 1
        for s in self.specials:
            if s.encode("utf-8") not in self.vocab.values():
                self.vocab[next_id] = s.encode("utf-8")
                next_id += 1
        self.to_id = {}
        for i in sorted(self.vocab, reverse=True):
            self.to_id[self.vocab[i]] = i  # the smallest id of a repeated value wins
        self.splitter = _special_pattern(self.specials)
        self.cache = {}

    def _pieces(self, text):
        """(piece, is_special) in order: special tokens and pre-tokens."""
        parts = self.splitter.split(text) if self.splitter else [text]
        for k, part in enumerate(parts):
            if k % 2:
                yield part, True
            else:
                for m in PAT.finditer(part):
                    yield m.group(), False

    def _bpe(self, pretoken):
        if pretoken in self.cache:
            return self.cache[pretoken]
        parts = [bytes([b]) for b in pretoken.encode("utf-8")]
        while len(parts) > 1:
            r, i = min((self.rank.get(p, float("inf")), i) for i, p in enumerate(pairwise(parts)))
            if r == float("inf"):
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        ids = [self.to_id[p] for p in parts]
        if len(self.cache) > 1024:  # bounded memory on any stream
            self.cache.clear()
        self.cache[pretoken] = ids
        return ids

    def _ids(self, pieces):
        for piece, special in pieces:
            if special:
                yield self.to_id[piece.encode("utf-8")]
            else:
                yield from self._bpe(piece)

    def encode(self, text: str) -> list[int]:
        return list(self._ids(self._pieces(text)))

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        buffer = ""
        for chunk in iterable:
            buffer += chunk
            pieces = list(self._pieces(buffer))
            if len(pieces) > 2:
                yield from self._ids(pieces[:-2])
                buffer = "".join(p for p, _ in pieces[-2:])
        yield from self.encode(buffer)

    def decode(self, ids) -> str:
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")


def get_tokenizer(vocab, merges, special_tokens=None):
    return StudentTokenizer(vocab, merges, special_tokens)
