"""Byte-level BPE training (SPEC §1.2).

Two phases, separately callable:

1. ``count_file_pretokens`` (counting.py): count the pre-tokens of a UTF-8 file.
   Large files are cut into chunks at safe boundaries and counted in worker processes.
2. ``train_bpe_from_counts``: the merge loop over those counts.

Vocabulary ids (SPEC leaves the order of the initial tokens to us): byte ``b``
is id ``b`` (0..255), the special tokens follow in the order given
(256, 257, ...), then one id per merge in merge order.

The merge loop keeps an index: pair -> count (weighted by pre-token
frequency) and pair -> ids of the distinct pre-tokens containing it. A merge
rewrites only the pre-tokens that contain the merged pair and applies the
net count change of each pair there, so pairs not touching the merge keep
their counts untouched. The most frequent pair comes from a heap with lazy
deletion; ties go to the lexicographically greater ``(bytes_a, bytes_b)``
through a sort key that reverses byte order (see ``_reversed_key``).
"""

import itertools
from collections.abc import Callable, Mapping, Sequence
from heapq import heapify, heappop, heappush
from pathlib import Path

from tqdm import tqdm

from lmspec.reference._types import PathLike
from lmspec.reference.tokenizer.counting import count_file_pretokens
from lmspec.reference.tokenizer.pretokenize import _check_special_tokens

__all__ = ["PROGRESS_MIN_BYTES", "train_bpe", "train_bpe_from_counts"]

# Inputs at least this large show tqdm progress unless progress=False.
PROGRESS_MIN_BYTES: int = 10 << 20


def train_bpe(
    input_path: PathLike,
    vocab_size: int,
    special_tokens: Sequence[str],
    *,
    num_workers: int | None = None,
    progress: bool | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file (SPEC §1.2).

    Ids: bytes 0..255, then ``special_tokens`` in order, then merges in order.

    Args:
        num_workers: most worker processes for pre-token counting (default: CPU
            count); files under ``PARALLEL_MIN_BYTES`` are counted in-process.
        progress: tqdm bars; default on for inputs of ``PROGRESS_MIN_BYTES`` or more.
        on_phase: called with a line as each phase starts (pre-tokenize, merges).

    Raises:
        ValueError: ``vocab_size`` below 256 + number of special tokens, or the
            file is not UTF-8 (the message gives the offset of the first bad byte).
        FileNotFoundError: ``input_path`` does not exist.
    """
    specials = _check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    path = Path(input_path)
    if not path.is_file():
        raise FileNotFoundError(f"train_bpe: input file {str(path)!r} does not exist or is not a file")
    if progress is None:
        progress = path.stat().st_size >= PROGRESS_MIN_BYTES
    if on_phase is not None:
        on_phase(f"pre-tokenizing {path} ({path.stat().st_size:,} bytes)")
    counts = count_file_pretokens(path, specials, num_workers=num_workers, progress=progress)
    if on_phase is not None:
        on_phase(f"merging: up to {vocab_size - 256 - len(specials):,} merges over {len(counts):,} distinct pre-tokens")
    return train_bpe_from_counts(counts, vocab_size, specials, progress=progress)


def _check_vocab_size(vocab_size: int, specials: tuple[str, ...]) -> None:
    smallest = 256 + len(specials)
    if vocab_size < smallest:
        raise ValueError(
            f"vocab_size ({vocab_size}) must be at least {smallest}: 256 byte tokens + {len(specials)} special token(s)"
        )


# --- phase 2: merges ---------------------------------------------------------
_REVERSE_BYTES = {i: 255 - i for i in range(256)}
_END = "\u0100"


def _reversed_key(token: bytes) -> str:
    """Sort key that orders tokens in REVERSE of bytes order, prefix-safe.

    Each byte ``b`` becomes ``chr(255 - b)`` and a terminator ``chr(256)``
    (above every byte) is appended, so ``key(x) < key(y)`` iff ``x > y`` as
    bytes, and ``key(a1) + key(b1) < key(a2) + key(b2)`` iff
    ``(a1, b1) > (a2, b2)``: a min-heap on ``(-count, key)`` pops the most
    frequent pair, ties to the lexicographically greater one.
    """
    return token.decode("latin-1").translate(_REVERSE_BYTES) + _END


def _initial_words(
    word_counts: Mapping[str | bytes | tuple[bytes, ...], int],
) -> tuple[list[list[int]], list[int]]:
    merged: dict[bytes, int] = {}
    for word, count in word_counts.items():
        if isinstance(word, str):
            raw = word.encode("utf-8")
        elif isinstance(word, bytes):
            raw = word
        else:
            for part in word:
                if len(part) != 1:
                    raise ValueError(f"word_counts key {word!r}: tuple parts must be single bytes, got {part!r}")
            raw = b"".join(word)
        if count < 0:
            raise ValueError(f"word_counts[{word!r}] is {count}; counts must be non-negative")
        if count and raw:
            merged[raw] = merged.get(raw, 0) + count
    return [list(raw) for raw in merged], list(merged.values())


def train_bpe_from_counts(
    word_counts: Mapping[str | bytes | tuple[bytes, ...], int],
    vocab_size: int,
    special_tokens: Sequence[str],
    *,
    progress: bool = False,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The BPE merge loop over pre-token counts (SPEC §1.2); ids as in ``train_bpe``.

    Keys are pre-tokens: ``str`` (UTF-8 encoded), ``bytes``, or tuples of
    single bytes (``(b"l", b"o", b"w")``). Merges stop at ``vocab_size`` or
    when no pair is left.
    """
    specials = _check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    for token in specials:
        vocab[len(vocab)] = token.encode("utf-8")
    merges: list[tuple[bytes, bytes]] = []
    words, freqs = _initial_words(word_counts)
    # Keys of special ids are never used: specials never take part in pairs.
    keys = [_reversed_key(vocab[i]) for i in range(len(vocab))]
    pair_counts, pair_words = _count_pairs(words, freqs)
    heap = [(-count, keys[a] + keys[b], a, b) for (a, b), count in pair_counts.items()]
    heapify(heap)

    bar = tqdm(total=vocab_size - len(vocab), desc="merges", disable=not progress)
    while len(vocab) < vocab_size:
        best = _pop_most_frequent(heap, pair_counts)
        if best is None:
            break  # no pair left to merge
        a, b = best
        new_id = len(vocab)
        vocab[new_id] = vocab[a] + vocab[b]
        merges.append((vocab[a], vocab[b]))
        keys.append(_reversed_key(vocab[new_id]))
        deltas = _merge_in_words(words, freqs, pair_words, best, new_id)
        pair_counts.pop(best, None)  # every occurrence is gone
        _apply_deltas(deltas, pair_counts, pair_words, heap, keys)
        bar.update(1)
    bar.close()
    return vocab, merges


def _count_pairs(
    words: list[list[int]], freqs: list[int]
) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], set[int]]]:
    """How often each adjacent pair occurs (weighted by the words' counts), and which words hold it."""
    pair_counts: dict[tuple[int, int], int] = {}
    pair_words: dict[tuple[int, int], set[int]] = {}
    for wi, word in enumerate(words):
        count = freqs[wi]
        for pair in itertools.pairwise(word):
            pair_counts[pair] = pair_counts.get(pair, 0) + count
            holders = pair_words.get(pair)
            if holders is None:
                pair_words[pair] = {wi}
            else:
                holders.add(wi)
    return pair_counts, pair_words


def _pop_most_frequent(
    heap: list[tuple[int, str, int, int]], pair_counts: dict[tuple[int, int], int]
) -> tuple[int, int] | None:
    """The most frequent pair (ties: the lexicographically greater one), None when none is left."""
    while heap:
        neg_count, _, a, b = heappop(heap)
        if pair_counts.get((a, b)) == -neg_count:
            return a, b
        # else stale: that pair's count changed after this entry was pushed
    return None


def _merge_in_words(
    words: list[list[int]],
    freqs: list[int],
    pair_words: dict[tuple[int, int], set[int]],
    merged_pair: tuple[int, int],
    new_id: int,
) -> dict[tuple[int, int], int]:
    """Replace ``merged_pair`` by ``new_id`` in every word holding it; the pair counts' changes."""
    a, b = merged_pair
    deltas: dict[tuple[int, int], int] = {}
    for wi in pair_words.pop(merged_pair):
        word = words[wi]
        positions = [i for i, pair in enumerate(itertools.pairwise(word)) if pair == merged_pair]
        if not positions:
            continue  # stale holder: pair_words sets may overshoot, never undershoot
        count = freqs[wi]
        n = len(word)
        if len(positions) == 1:
            # Fast path: only the pairs next to the occurrence change.
            i = positions[0]
            if i > 0:
                left = word[i - 1]
                deltas[(left, a)] = deltas.get((left, a), 0) - count
                deltas[(left, new_id)] = deltas.get((left, new_id), 0) + count
                pair_words.setdefault((left, new_id), set()).add(wi)
            if i + 2 < n:
                right = word[i + 2]
                deltas[(b, right)] = deltas.get((b, right), 0) - count
                deltas[(new_id, right)] = deltas.get((new_id, right), 0) + count
                pair_words.setdefault((new_id, right), set()).add(wi)
            words[wi] = [*word[:i], new_id, *word[i + 2 :]]
            continue
        if a == b:  # "aaa": occurrences overlap; keep them left to right
            kept = [positions[0]]
            for i in positions[1:]:
                if i >= kept[-1] + 2:
                    kept.append(i)
            positions = kept
        merged: list[int] = []
        start = 0
        for i in positions:
            merged += word[start:i]
            merged.append(new_id)
            start = i + 2
        merged += word[start:]
        for pair in itertools.pairwise(word):
            deltas[pair] = deltas.get(pair, 0) - count
        for pair in itertools.pairwise(merged):
            deltas[pair] = deltas.get(pair, 0) + count
            if new_id in pair:
                pair_words.setdefault(pair, set()).add(wi)
        words[wi] = merged
    return deltas


def _apply_deltas(
    deltas: dict[tuple[int, int], int],
    pair_counts: dict[tuple[int, int], int],
    pair_words: dict[tuple[int, int], set[int]],
    heap: list[tuple[int, str, int, int]],
    keys: list[str],
) -> None:
    """New counts of the pairs a merge changed, pushed on the heap (gone pairs forgotten)."""
    for pair, delta in deltas.items():
        if delta == 0:
            continue  # pair not touching the merge: its count is unchanged
        count = pair_counts.get(pair, 0) + delta
        if count > 0:
            pair_counts[pair] = count
            heappush(heap, (-count, keys[pair[0]] + keys[pair[1]], pair[0], pair[1]))
        else:
            pair_counts.pop(pair, None)
            pair_words.pop(pair, None)
