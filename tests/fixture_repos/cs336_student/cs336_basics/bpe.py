"""Byte-level BPE training (handout section 2.5).

My approach: pre-tokenize the whole file with the GPT-2 regex (after splitting
on the special tokens), count how often each pre-token occurs, and then run the
merge loop on the *distinct* pre-tokens only, weighting every pair by the count
of the word it is in. The pair counts are kept in a dict and only the words that
contain the merged pair get recounted, which is fast enough for TinyStories.
"""

import os
from collections import Counter, defaultdict

import regex as re

from tools.profiling import timer

# GPT-2 pre-tokenizer pattern, from the handout (tiktoken PR #234)
PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_PAT_RE = re.compile(PAT)


def split_on_special_tokens(text: str, special_tokens: list[str]) -> list[str]:
    """Split `text` on the special tokens (the special tokens themselves are dropped)."""
    if not special_tokens:
        return [text]
    # longest first so that overlapping special tokens match the long one
    alternatives = sorted(special_tokens, key=len, reverse=True)
    pattern = "|".join(re.escape(tok) for tok in alternatives)
    return re.split(pattern, text)


def count_pretokens(text: str, special_tokens: list[str]) -> Counter[bytes]:
    counts: Counter[bytes] = Counter()
    for segment in split_on_special_tokens(text, special_tokens):
        for match in _PAT_RE.finditer(segment):
            counts[match.group().encode("utf-8")] += 1
    return counts


def _pairs_of(word: list[bytes]) -> list[tuple[bytes, bytes]]:
    return list(zip(word[:-1], word[1:]))


def _merge_word(word: list[bytes], pair: tuple[bytes, bytes]) -> list[bytes]:
    """Replace non-overlapping occurrences of `pair`, left to right."""
    a, b = pair
    merged = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            merged.append(a + b)
            i += 2
        else:
            merged.append(word[i])
            i += 1
    return merged


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on the text file at `input_path`.

    Returns the vocab (ids 0-255 are the single bytes, then one id per merge in
    the order the merges were made, then the special tokens) and the list of
    merges in the order they were created.
    """
    special_tokens = list(special_tokens or [])
    num_merges = vocab_size - 256 - len(special_tokens)

    with open(input_path, encoding="utf-8") as f:
        text = f.read()

    with timer("pre-tokenization"):
        pretoken_counts = count_pretokens(text, special_tokens)

    # every distinct pre-token becomes a list of 1-byte tokens
    words: list[list[bytes]] = []
    freqs: list[int] = []
    for pretoken, count in pretoken_counts.items():
        words.append([bytes([b]) for b in pretoken])
        freqs.append(count)

    pair_counts: dict[tuple[bytes, bytes], int] = defaultdict(int)
    # which words contain a given pair (may contain stale entries, checked later)
    pair_to_words: dict[tuple[bytes, bytes], set[int]] = defaultdict(set)
    for idx, word in enumerate(words):
        for pair in _pairs_of(word):
            pair_counts[pair] += freqs[idx]
            pair_to_words[pair].add(idx)

    merges: list[tuple[bytes, bytes]] = []
    with timer("merge loop"):
        for _ in range(max(num_merges, 0)):
            if not pair_counts:
                break
            # most frequent pair; ties -> lexicographically greater pair
            best = max(pair_counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
            merges.append(best)

            for idx in list(pair_to_words[best]):
                word = words[idx]
                old_pairs = _pairs_of(word)
                if best not in old_pairs:
                    continue
                new_word = _merge_word(word, best)
                for pair in old_pairs:
                    pair_counts[pair] -= freqs[idx]
                    if pair_counts[pair] <= 0:
                        del pair_counts[pair]
                for pair in _pairs_of(new_word):
                    pair_counts[pair] += freqs[idx]
                    pair_to_words[pair].add(idx)
                words[idx] = new_word
            del pair_to_words[best]

    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    for a, b in merges:
        vocab[len(vocab)] = a + b
    for tok in special_tokens:
        vocab[len(vocab)] = tok.encode("utf-8")
    return vocab, merges
