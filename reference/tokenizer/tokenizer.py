"""Byte-level BPE encoding and decoding (SPEC §1.3).

``Tokenizer(vocab, merges, special_tokens)`` encodes text by cutting out
special tokens (longest match wins), pre-tokenizing the rest with the GPT-2
pattern, and applying rank-based BPE to each pre-token: repeatedly merge the
adjacent pair whose merge was created earliest (the leftmost such pair on a
tie), until no merge applies. That is tiktoken's algorithm with ranks = merge
order, minus tiktoken's shortcut of mapping a pre-token found whole in the
vocabulary straight to its id (the two agree on vocabularies made by BPE
training). Encoded pre-tokens are cached (``_PretokenCache``).

Save format (``save`` / ``from_files``; details in ``reference.tokenizer.files``):
GPT-2's own. ``vocab.json`` is a JSON object mapping each token, written in
GPT-2's printable byte alphabet (``b" the"`` -> ``"Ġthe"``), to its id;
``merges.txt`` has one merge per line in rank order, ``"Ġt he"``, with an
optional leading ``#version`` line. ``from_files`` therefore also loads the
released GPT-2 ``vocab.json`` / ``merges.txt``.
"""

import itertools
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from heapq import heapify, heappop, heappush
from typing import SupportsIndex

from lmspec.reference._types import PathLike
from lmspec.reference.tokenizer.files import load_vocab_merges, save_vocab_merges
from lmspec.reference.tokenizer.pretokenize import (
    GPT2_REGEX,
    _check_special_tokens,
    special_prefix_start,
    special_spans,
    special_token_regex,
    split_final_pretokens,
)

__all__ = ["CACHE_GENERATION_ENTRIES", "FLUSH_CHARS", "STREAM_CACHE_ENTRIES", "STREAM_FLUSH_CHARS", "Tokenizer"]

# encode()'s pre-token cache: two generations of at most this many entries
# (65,536 in all, about 17 MB on Python source; BENCHMARKS.md).
CACHE_GENERATION_ENTRIES: int = 1 << 15
# encode_iterable's defaults: a cache of its own and a small buffer, so that
# streaming adds well under 1 MiB of memory whatever the stream's length
# (BENCHMARKS.md: under 0.75 MB extra RSS on 5, 50 and 200 MB of Python source).
STREAM_CACHE_ENTRIES: int = 1 << 10
STREAM_FLUSH_CHARS: int = 1 << 13
# Bulk streaming (encode_iterable_batches, used by encode_file): a large
# buffer and the instance's cache, for throughput.
FLUSH_CHARS: int = 1 << 16
# Pre-tokens with more byte tokens than this use the heap-based merge loop.
_LONG_PRETOKEN: int = 48
_NO_RANK: int = 1 << 62


class _PretokenCache:
    """Encoded pre-tokens in two generations of at most ``entries`` each.

    New entries go to the young generation; when it is full it becomes the
    old one and the previous old one is dropped. A hit in the old generation
    copies the entry back into the young one, so frequent pre-tokens survive
    the turnover, which a cache cleared when full loses all at once.
    """

    __slots__ = ("entries", "old", "young")

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self.young: dict[str, tuple[int, ...]] = {}
        self.old: dict[str, tuple[int, ...]] = {}


class Tokenizer:
    """A byte-level BPE tokenizer (SPEC §1.3).

    Attributes:
        vocab: id -> token bytes, including the special tokens (a copy: the
            caller's dict is never modified).
        merges: the merges in rank order.
        special_tokens: the special tokens, deduplicated, in the order given.
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | None = None,
    ) -> None:
        """Special tokens missing from ``vocab`` get the next free ids (``max id + 1``, ...).

        Raises:
            ValueError: a merge whose parts or result are not in ``vocab``.
        """
        self.vocab: dict[int, bytes] = dict(vocab)
        self.merges: list[tuple[bytes, bytes]] = list(merges)
        self.special_tokens: list[str] = list(_check_special_tokens(special_tokens or ()))

        # Lowest id per byte string (a vocabulary may repeat a byte string).
        self._token_ids: dict[bytes, int] = {}
        for token_id in sorted(self.vocab):
            self._token_ids.setdefault(self.vocab[token_id], token_id)
        self._special_ids: dict[str, int] = {}
        next_id = max(self.vocab, default=-1) + 1
        for special in self.special_tokens:
            encoded = special.encode("utf-8")
            if encoded not in self._token_ids:
                self.vocab[next_id] = encoded
                self._token_ids[encoded] = next_id
                next_id += 1
            self._special_ids[special] = self._token_ids[encoded]
        self._special_regex = special_token_regex(self.special_tokens)

        self._byte_ids: list[int | None] = [self._token_ids.get(bytes([b])) for b in range(256)]
        self._pair_ranks: dict[tuple[int, int], int] = {}
        self._merged_ids: list[int] = []
        token_ids = self._token_ids
        for rank, (left, right) in enumerate(self.merges):
            try:
                pair = (token_ids[left], token_ids[right])
                merged_id = token_ids[left + right]
            except KeyError:
                missing = next(p for p in (left, right, left + right) if p not in token_ids)
                raise ValueError(
                    f"merges[{rank}] = ({left!r}, {right!r}): {missing!r} is not in the vocabulary"
                ) from None
            self._pair_ranks.setdefault(pair, rank)
            self._merged_ids.append(merged_id)
        self._cache = _PretokenCache(CACHE_GENERATION_ENTRIES)

    @classmethod
    def from_files(
        cls,
        vocab_path: PathLike,
        merges_path: PathLike,
        special_tokens: Sequence[str] | None = None,
    ) -> "Tokenizer":
        """Load a tokenizer saved by ``save`` or GPT-2's released files (module docstring)."""
        vocab, merges = load_vocab_merges(vocab_path, merges_path)
        return cls(vocab, merges, special_tokens)

    def save(self, vocab_path: PathLike, merges_path: PathLike) -> None:
        """Write ``vocab.json`` and ``merges.txt`` (special tokens included in the vocab)."""
        save_vocab_merges(self.vocab, self.merges, vocab_path, merges_path)

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={len(self.vocab)}, merges={len(self.merges)}, "
            f"special_tokens={self.special_tokens!r})"
        )

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""
        return len(self.vocab)

    @property
    def special_token_ids(self) -> dict[str, int]:
        """Special token -> its id."""
        return dict(self._special_ids)

    # --- encoding -------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (SPEC §1.3)."""
        return self._encode(text, self._cache)

    def _encode(self, text: str, cache: _PretokenCache) -> list[int]:
        spans, rest = special_spans(text, self._special_regex)
        return self._encode_spans(text, spans, cache) + self._encode_pretokens(GPT2_REGEX.findall(text, rest), cache)

    def _encode_spans(self, text: str, spans: list[tuple[int, int, str | None]], cache: _PretokenCache) -> list[int]:
        """Ids of ``text``'s spans (``special_spans``): ordinary text pre-tokenized in place."""
        ids: list[int] = []
        for start, stop, special in spans:
            if special is None:
                ids += self._encode_pretokens(GPT2_REGEX.findall(text, start, stop), cache)
            else:
                ids.append(self._special_ids[special])
        return ids

    def encode_iterable(
        self,
        iterable: Iterable[str],
        *,
        flush_chars: int = STREAM_FLUSH_CHARS,
        cache_entries: int | None = STREAM_CACHE_ENTRIES,
    ) -> Iterator[int]:
        """Lazily yield ``encode("".join(iterable))``, whatever the chunking (SPEC §1.3).

        Text is buffered and, once ``flush_chars`` characters are pending, the
        part whose tokens no continuation can change is encoded and dropped:
        everything before the last special-token prefix and the last pre-token
        or two (``split_final_pretokens``). Encoded pre-tokens go to a cache of
        this call's own, two generations of ``cache_entries`` (``None``: the
        instance's large cache, shared with ``encode``). Memory is bounded by
        the buffer, the longest pre-token and the cache, not by the stream.
        """
        for ids in self.encode_iterable_batches(iterable, flush_chars=flush_chars, cache_entries=cache_entries):
            yield from ids

    def encode_iterable_batches(
        self, iterable: Iterable[str], *, flush_chars: int = FLUSH_CHARS, cache_entries: int | None = None
    ) -> Iterator[list[int]]:
        """``encode_iterable`` yielding lists of ids (concatenated: the same ids), for bulk use.

        Its defaults favour throughput over memory: a large buffer and the instance's cache.
        """
        if flush_chars < 1:
            raise ValueError(f"flush_chars ({flush_chars}) must be at least 1")
        if cache_entries is not None and cache_entries < 1:
            raise ValueError(f"cache_entries ({cache_entries}) must be at least 1, or None")
        cache = self._cache if cache_entries is None else _PretokenCache(cache_entries)
        parts: list[str] = []
        pending = 0
        threshold = flush_chars
        for chunk in iterable:
            if not isinstance(chunk, str):
                raise TypeError(f"encode_iterable expects str chunks, got {type(chunk).__name__}: {chunk!r:.60}")
            parts.append(chunk)
            pending += len(chunk)
            if pending >= threshold:
                buffer = "".join(parts)
                ids, consumed = self._encode_final_prefix(buffer, cache)
                yield ids
                rest = buffer[consumed:]
                parts, pending = [rest], len(rest)
                # Doubling keeps a long pending pre-token from being rescanned per chunk.
                threshold = max(flush_chars, 2 * pending)
        yield self._encode("".join(parts), cache)

    def _encode_final_prefix(self, text: str, cache: _PretokenCache) -> tuple[list[int], int]:
        """Ids of the longest prefix of ``text`` that more text cannot change, and its length."""
        # Special tokens starting before `hold` lie inside `text` and are final.
        hold = len(text) if self._special_regex is None else special_prefix_start(text, self.special_tokens)
        spans, segment_start = special_spans(text, self._special_regex, hold)
        ids = self._encode_spans(text, spans, cache)
        pretokens, consumed = split_final_pretokens(text[segment_start : max(hold, segment_start)])
        ids += self._encode_pretokens(pretokens, cache)
        return ids, segment_start + consumed

    def _encode_pretokens(self, pretokens: list[str], cache: _PretokenCache) -> list[int]:
        """BPE-encode pre-tokens through ``cache`` (the hot loop: no per-token calls; a hit
        is one dict lookup). BPE: merge the lowest-ranked adjacent pair until none applies."""
        young, old, entries = cache.young, cache.old, cache.entries
        ranks_get = self._pair_ranks.get
        merged_ids = self._merged_ids
        byte_ids = self._byte_ids
        out: list[int] = []
        for pretoken in pretokens:
            ids = young.get(pretoken)
            if ids is None:
                ids = old.get(pretoken)
                if ids is None:
                    ids = [byte_ids[b] for b in pretoken.encode("utf-8")]
                    if None in ids:
                        self._raise_missing_byte(pretoken)
                    if len(ids) > _LONG_PRETOKEN:
                        ids = self._merge_long(ids)
                    else:
                        while len(ids) > 1:
                            ranks = [ranks_get(pair, _NO_RANK) for pair in itertools.pairwise(ids)]
                            best = min(ranks)
                            if best == _NO_RANK:
                                break
                            i = ranks.index(best)
                            ids[i : i + 2] = (merged_ids[best],)
                    # a tuple of ints, unlike a list, is untracked by the cyclic GC
                    # after one collection: GC passes stay cheap however full the cache
                    ids = tuple(ids)
                if len(young) >= entries:
                    cache.old = old = young
                    cache.young = young = {}
                young[pretoken] = ids
            out += ids
        return out

    def _merge_long(self, ids: list[int]) -> list[int]:
        """Rank-based BPE in O(n log n): a heap of (rank, position) over a linked list.

        Positions are original indices, so popping (rank, position) takes the
        leftmost of equal-rank pairs, exactly as the quadratic loop does.
        """
        ranks_get = self._pair_ranks.get
        merged_ids = self._merged_ids
        tokens: list[int | None] = list(ids)
        n = len(tokens)
        following = [*range(1, n), -1]
        preceding = list(range(-1, n - 1))
        heap = [(r, i) for i, pair in enumerate(itertools.pairwise(ids)) if (r := ranks_get(pair)) is not None]
        heapify(heap)
        while heap:
            rank, i = heappop(heap)
            j = following[i]
            if tokens[i] is None or j < 0 or ranks_get((tokens[i], tokens[j])) != rank:
                continue  # stale: a neighbour was merged since this entry was pushed
            tokens[i] = merged_ids[rank]
            tokens[j] = None
            k = following[j]
            following[i] = k
            if k >= 0:
                preceding[k] = i
                if (r := ranks_get((tokens[i], tokens[k]))) is not None:
                    heappush(heap, (r, i))
            h = preceding[i]
            if h >= 0 and (r := ranks_get((tokens[h], tokens[i]))) is not None:
                heappush(heap, (r, h))
        return [t for t in tokens if t is not None]

    def _raise_missing_byte(self, pretoken: str) -> None:
        for b in pretoken.encode("utf-8"):
            if self._byte_ids[b] is None:
                raise ValueError(
                    f"cannot encode {pretoken!r}: byte 0x{b:02x} has no single-byte token in the vocabulary"
                )

    # --- decoding -------------------------------------------------------------
    def decode(self, ids: Iterable[SupportsIndex]) -> str:
        """Concatenate the ids' bytes and decode UTF-8, malformed bytes -> U+FFFD (SPEC §1.3).

        Raises:
            ValueError: an id not in the vocabulary (the message names it and its position).
        """
        ids = list(ids)
        vocab = self.vocab
        try:
            data = b"".join([vocab[i] for i in ids])
        except (KeyError, TypeError):
            data = b"".join([vocab[self._checked_id(i, position)] for position, i in enumerate(ids)])
        return data.decode("utf-8", errors="replace")

    def _checked_id(self, token_id: object, position: int) -> int:
        try:
            value = operator.index(token_id)  # numpy / torch integer scalars
        except TypeError:
            raise ValueError(f"decode: id {token_id!r} at position {position} is not an integer") from None
        if value not in self.vocab or isinstance(token_id, bool):
            raise ValueError(
                f"decode: unknown token id {token_id!r} at position {position} "
                f"(the vocabulary has {len(self.vocab)} ids, "
                f"{min(self.vocab, default=0)}..{max(self.vocab, default=-1)})"
            )
        return value
