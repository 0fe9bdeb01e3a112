"""Pre-tokenization (SPEC §1.1): split on special tokens, then the GPT-2 pattern.

Text is cut on special-token occurrences first (longest match wins, SPEC
§1.3), and each special-free segment is cut into pre-tokens by the GPT-2
pattern. BPE never merges across either kind of boundary.

The streaming helpers at the bottom (``special_prefix_start``,
``split_final_pretokens``) say which part of a text prefix is already
tokenized for good, whatever text follows; ``Tokenizer.encode_iterable``
builds on them.
"""

import functools
from collections import Counter
from collections.abc import Iterator, Sequence

import regex

__all__ = [
    "GPT2_PATTERN",
    "GPT2_REGEX",
    "count_pretokens",
    "iter_pretokens",
    "special_prefix_start",
    "special_spans",
    "special_token_regex",
    "split_final_pretokens",
    "split_on_special_tokens",
]

GPT2_PATTERN: str = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_REGEX: regex.Pattern = regex.compile(GPT2_PATTERN)


def _check_special_tokens(special_tokens: Sequence[str]) -> tuple[str, ...]:
    """Deduplicated special tokens in first-seen order; rejects the empty string."""
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a list of strings, not the string {special_tokens!r}")
    for i, token in enumerate(special_tokens):
        if token == "":
            raise ValueError(f"special_tokens[{i}] is the empty string; a special token needs a character")
    return tuple(dict.fromkeys(special_tokens))


@functools.lru_cache(maxsize=64)
def _special_regex(special_tokens: tuple[str, ...]) -> regex.Pattern | None:
    if not special_tokens:
        return None
    # Longest first: the regex alternation takes the first alternative that
    # matches, so this makes the longest special win at each position.
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("|".join(regex.escape(token) for token in ordered))


def special_token_regex(special_tokens: Sequence[str]) -> regex.Pattern | None:
    """Alternation of the escaped special tokens, longest first (None when there are none)."""
    return _special_regex(_check_special_tokens(special_tokens))


def special_spans(
    text: str, pattern: regex.Pattern | None, limit: int | None = None
) -> tuple[list[tuple[int, int, str | None]], int]:
    """``text`` cut at the special tokens ``pattern`` matches: the spans in order,
    ``(start, stop, None)`` for ordinary text (never empty) and ``(start, stop,
    token)`` for a special token, up to the end of the last special token that
    starts before ``limit`` (default: anywhere); and where the text after them starts.

    The one split on special tokens: ``split_on_special_tokens`` and the
    tokenizer's encoders read it (positions, so the GPT-2 pattern can scan
    ``text`` in place). Example: ``special_spans("a<|e|>b", special_token_regex(["<|e|>"]))
    == ([(0, 1, None), (1, 6, "<|e|>")], 6)``.
    """
    spans: list[tuple[int, int, str | None]] = []
    start = 0
    if pattern is not None:
        for match in pattern.finditer(text):
            if limit is not None and match.start() >= limit:
                break
            if match.start() > start:
                spans.append((start, match.start(), None))
            spans.append((match.start(), match.end(), match.group()))
            start = match.end()
    return spans, start


def split_on_special_tokens(text: str, special_tokens: Sequence[str]) -> list[tuple[str, bool]]:
    """Cut ``text`` into ``(piece, is_special)`` pairs in order; empty text pieces are dropped.

    Example: ``split_on_special_tokens("a<|e|>b", ["<|e|>"]) ==
    [("a", False), ("<|e|>", True), ("b", False)]``.
    """
    spans, rest = special_spans(text, special_token_regex(special_tokens))
    pieces = [(text[start:stop], special is not None) for start, stop, special in spans]
    if rest < len(text):
        pieces.append((text[rest:], False))
    return pieces


def iter_pretokens(text: str, special_tokens: Sequence[str] = ()) -> Iterator[str]:
    """The pre-tokens of ``text`` in order, special-token occurrences skipped (as in training).

    Example: ``list(iter_pretokens("I'll go!")) == ["I", "'ll", " go", "!"]``.
    """
    for piece, is_special in split_on_special_tokens(text, special_tokens):
        if not is_special:
            yield from GPT2_REGEX.findall(piece)


def count_pretokens(text: str, special_tokens: Sequence[str] = ()) -> Counter[str]:
    """How often each pre-token occurs in ``text`` (special tokens never counted)."""
    counts: Counter[str] = Counter()
    pattern = special_token_regex(special_tokens)
    segments = [text] if pattern is None else pattern.split(text)
    for segment in segments:
        counts.update(GPT2_REGEX.findall(segment))
    return counts


# --- streaming: what is final in a prefix ------------------------------------
@functools.lru_cache(maxsize=64)
def _proper_prefixes(special_tokens: tuple[str, ...]) -> tuple[frozenset[str], int]:
    prefixes = frozenset(token[:k] for token in special_tokens for k in range(1, len(token)))
    return prefixes, max((len(p) for p in prefixes), default=0)


def special_prefix_start(text: str, special_tokens: Sequence[str]) -> int:
    """Smallest ``i`` with ``text[i:]`` a non-empty proper prefix of a special token.

    ``len(text)`` when there is none.

    A special token may begin at such an ``i`` once more text arrives, so a
    stream must hold ``text[i:]`` back. Every special-token match that starts
    before ``i`` lies wholly inside ``text`` and is final.
    """
    prefixes, longest = _proper_prefixes(_check_special_tokens(special_tokens))
    n = len(text)
    for k in range(min(longest, n), 0, -1):
        if text[n - k :] in prefixes:
            return n - k
    return n


def split_final_pretokens(segment: str) -> tuple[list[str], int]:
    """The leading pre-tokens of ``segment`` that no continuation can change, and their length.

    ``segment`` is the open end of a special-free segment: more text may follow.
    Matching the GPT-2 pattern at a position reads the pre-token and, at most,
    the character after it (greedy runs stop there; ``\\s+(?!\\S)`` looks at
    it) or, for a leading ``'``, two characters on (``'ll``, ``'ve``, ``'re``).
    So a pre-token is final when that character exists: every pre-token but
    the last, except a ``'`` pre-token starting in the last two characters
    (``"it'l"`` splits ``it | ' | l`` but ``"it'll"`` splits ``it | 'll``).
    Since the pattern has no look-behind, matching resumes identically at the
    returned offset.

    Subtle: re-pre-tokenizing ``segment[:offset]`` alone is NOT the same
    (``"a \\nb"`` gives ``a | ' ' | \\n`` before ``b``, but ``"a \\n"`` alone
    gives ``a | ' \\n'``), so callers must use the returned pre-tokens.
    """
    tokens = GPT2_REGEX.findall(segment)
    if len(tokens) < 2:
        return [], 0
    keep = len(tokens) - 1  # the last pre-token is never final
    second_last = tokens[-2]
    start_second_last = len(segment) - len(tokens[-1]) - len(second_last)
    if second_last[0] == "'" and start_second_last + 2 >= len(segment):
        keep -= 1
    held = len(tokens[-1]) + (len(second_last) if keep < len(tokens) - 1 else 0)
    return tokens[:keep], len(segment) - held
