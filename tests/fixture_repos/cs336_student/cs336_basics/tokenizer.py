"""BPE tokenizer (handout section 2.6): encode / decode / encode_iterable."""

import os
import pickle
from collections.abc import Iterable, Iterator

import regex as re

from cs336_basics.bpe import PAT

REPLACEMENT_CHAR = "\ufffd"


class Tokenizer:
    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
    ):
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self.special_tokens = list(special_tokens) if special_tokens else []

        # special tokens that are not in the vocab yet get the next free ids
        known = set(self.vocab.values())
        next_id = max(self.vocab) + 1 if self.vocab else 0
        for tok in self.special_tokens:
            tok_bytes = tok.encode("utf-8")
            if tok_bytes not in known:
                self.vocab[next_id] = tok_bytes
                known.add(tok_bytes)
                next_id += 1

        self.token_to_id = {tok: i for i, tok in self.vocab.items()}
        self.merge_ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.pat = re.compile(PAT)

        if self.special_tokens:
            # longest first: with "<|a|>" and "<|a|><|a|>" the long one must win
            by_length = sorted(self.special_tokens, key=len, reverse=True)
            self.special_pat = re.compile("(" + "|".join(re.escape(t) for t in by_length) + ")")
        else:
            self.special_pat = None

        self._cache: dict[bytes, list[int]] = {}
        self.max_cache_size = 2048

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: list[str] | None = None,
    ) -> "Tokenizer":
        """Load a vocab and merges that were pickled by my training script."""
        with open(vocab_filepath, "rb") as f:
            vocab = pickle.load(f)
        with open(merges_filepath, "rb") as f:
            merges = pickle.load(f)
        return cls(vocab, merges, special_tokens)

    def save(self, vocab_filepath: str | os.PathLike, merges_filepath: str | os.PathLike) -> None:
        with open(vocab_filepath, "wb") as f:
            pickle.dump(self.vocab, f)
        with open(merges_filepath, "wb") as f:
            pickle.dump(self.merges, f)

    # ------------------------------------------------------------------ encode
    def _bpe(self, pretoken: bytes) -> list[int]:
        if pretoken in self._cache:
            return self._cache[pretoken]
        parts = [bytes([b]) for b in pretoken]
        while len(parts) > 1:
            # find the pair that was merged earliest during training
            best_rank = None
            best_pair = None
            for pair in zip(parts[:-1], parts[1:]):
                rank = self.merge_ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best_rank = rank
                    best_pair = pair
            if best_pair is None:
                break
            merged = []
            i = 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best_pair:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        ids = [self.token_to_id[p] for p in parts]
        if len(self._cache) >= self.max_cache_size:
            # don't let the cache grow forever on a long stream
            self._cache.clear()
        self._cache[pretoken] = ids
        return ids

    def _encode_ordinary(self, text: str) -> list[int]:
        ids = []
        for match in self.pat.finditer(text):
            ids.extend(self._bpe(match.group().encode("utf-8")))
        return ids

    def encode(self, text: str) -> list[int]:
        if self.special_pat is None:
            return self._encode_ordinary(text)
        ids = []
        # re.split with a capturing group keeps the special tokens (odd positions)
        for i, piece in enumerate(self.special_pat.split(text)):
            if i % 2 == 1:
                ids.append(self.token_to_id[piece.encode("utf-8")])
            elif piece:
                ids.extend(self._encode_ordinary(piece))
        return ids

    def _safe_prefix_length(self, buffer: str) -> int:
        """How much of `buffer` can be encoded now without changing the result
        once more text arrives. I keep back the last pre-token (it can still
        grow, e.g. "hel" + "lo" or "\\n" + "\\n") and anything at the end that
        could be the start of a special token."""
        end = len(buffer)
        longest = max((len(t) for t in self.special_tokens), default=0)
        if longest:
            # don't cut in the middle of a special token that is already complete
            inside = set()
            for m in self.special_pat.finditer(buffer):
                if m.end() > len(buffer) - longest:
                    inside.update(range(m.start() + 1, m.end()))
            for k in range(min(longest, len(buffer)), 0, -1):
                start = len(buffer) - k
                if start in inside:
                    continue
                tail = buffer[start:]
                if any(tok != tail and tok.startswith(tail) for tok in self.special_tokens):
                    end = start
                    break
        head = buffer[:end]
        if self.special_pat is not None:
            pieces = self.special_pat.split(head)
            last_text = pieces[-1]
            offset = len(head) - len(last_text)
        else:
            last_text = head
            offset = 0
        last_start = None
        for match in self.pat.finditer(last_text):
            last_start = match.start()
        if last_start is None:
            return end
        return offset + last_start

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode an iterable of strings (e.g. a file handle)."""
        buffer = ""
        for chunk in iterable:
            buffer += chunk
            cut = self._safe_prefix_length(buffer)
            if cut > 0:
                yield from self.encode(buffer[:cut])
                buffer = buffer[cut:]
        if buffer:
            yield from self.encode(buffer)

    # ------------------------------------------------------------------ decode
    def decode(self, ids: list[int]) -> str:
        pieces = []
        for i in ids:
            if i in self.vocab:
                pieces.append(self.vocab[i])
            else:
                # unknown id: show it as the replacement character
                pieces.append(REPLACEMENT_CHAR.encode("utf-8"))
        return b"".join(pieces).decode("utf-8", errors="replace")
