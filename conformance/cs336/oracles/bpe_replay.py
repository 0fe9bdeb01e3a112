"""An obviously-correct, slow byte-level BPE trainer: the oracle for SPEC §1.2.

Every merge step recounts every adjacent pair of every pre-token from scratch
(weighted by the pre-token's frequency) and takes the max by ``(count, pair)``,
so ties go to the lexicographically greater ``(bytes_a, bytes_b)`` tuple. No
incremental bookkeeping, no caches: nothing to get subtly wrong. Quadratic, so
only for the small corpora the suite generates (and corpus.en in a pinch).

The keyword switches of :func:`train_bpe` reproduce *known bugs* (tie toward
the smaller pair, no pre-tokenization, special tokens counted, special tokens
deleted instead of split on). The suite never grades against them: they only
name the likely cause when an implementation's merges disagree with the
correct run.

This module is independent of ``reference/`` by design.
"""

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import regex

from lmspec.conformance import hints

#: SPEC §1.1, the GPT-2 pre-tokenization pattern.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2_RE = regex.compile(GPT2_PATTERN)
#: A known bug: the pattern compiled case-insensitively ('S, 'T, 'LL... become contractions).
_GPT2_CASELESS_RE = regex.compile(GPT2_PATTERN, regex.IGNORECASE)

Pair = tuple[bytes, bytes]
Word = tuple[bytes, ...]


def special_splitter(special_tokens: Sequence[str], *, shortest_first: bool = False) -> "regex.Pattern[str] | None":
    """A regex that matches special tokens, leftmost first and longest first
    among those starting at the same place (SPEC §1.3: the longest match wins;
    ``shortest_first`` replays the bug that lets the shortest win)."""
    if not special_tokens:
        return None
    alternatives = sorted(set(special_tokens), key=len, reverse=not shortest_first)
    return regex.compile("|".join(regex.escape(s) for s in alternatives))


def split_on_specials(
    text: str, special_tokens: Sequence[str], *, shortest_first: bool = False
) -> list[tuple[str, bool]]:
    """``text`` cut into ``(piece, is_special)`` runs, none of them empty (the
    oracles' one split on special tokens; ``shortest_first``: see ``special_splitter``).

    >>> split_on_specials("a<|e|>b", ["<|e|>"])
    [('a', False), ('<|e|>', True), ('b', False)]
    """
    pattern = special_splitter(special_tokens, shortest_first=shortest_first)
    if pattern is None:
        return [(text, False)] if text else []
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], False))
        out.append((m.group(), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def pretokenize(text: str, *, ignorecase: bool = False) -> list[str]:
    """GPT-2 pre-tokens of special-token-free ``text`` (SPEC §1.1);
    ``ignorecase`` (a known bug) compiles the pattern with IGNORECASE."""
    return (_GPT2_CASELESS_RE if ignorecase else _GPT2_RE).findall(text)


def count_pretokens(
    text: str,
    special_tokens: Sequence[str] = (),
    *,
    use_pattern: bool = True,
    split_specials: bool = True,
    drop_specials: bool = False,
    ignorecase: bool = False,
) -> Counter[bytes]:
    """Frequency of each pre-token's UTF-8 bytes in ``text``.

    Correct behaviour is the default. ``use_pattern=False`` makes each
    special-free segment one "pre-token" (merges cross pre-token boundaries);
    ``split_specials=False`` leaves special tokens in the text, so they are
    pre-tokenized and counted like ordinary text; ``drop_specials=True`` deletes
    them and joins their neighbours (merges cross special tokens);
    ``ignorecase=True`` pre-tokenizes with the pattern compiled case-insensitively.
    """
    if drop_specials:
        segments = ["".join(p for p, special in split_on_specials(text, special_tokens) if not special)]
    elif split_specials:
        segments = [p for p, special in split_on_specials(text, special_tokens) if not special]
    else:
        segments = [text]
    counts: Counter[bytes] = Counter()
    for segment in segments:
        pieces = pretokenize(segment, ignorecase=ignorecase) if use_pattern else [segment]
        counts.update(p.encode("utf-8") for p in pieces if p)
    return counts


def words_of(pretokens: Counter[bytes]) -> Counter[Word]:
    """Each pre-token as a tuple of single bytes, with its frequency."""
    words: Counter[Word] = Counter()
    for token, n in pretokens.items():
        words[tuple(bytes([b]) for b in token)] += n
    return words


def count_pairs(words: Counter[Word]) -> Counter[Pair]:
    """Adjacent pairs inside each word, weighted by the word's frequency.
    Overlapping occurrences count separately: ``(a, a, a)`` has ``(a, a)`` twice."""
    pairs: Counter[Pair] = Counter()
    for word, n in words.items():
        for pair in itertools.pairwise(word):
            pairs[pair] += n
    return pairs


def merge_word(word: Word, pair: Pair, *, right_to_left: bool = False) -> Word:
    """Replace non-overlapping occurrences of ``pair`` scanning left to right:
    ``merge_word((a, a, a), (a, a)) == (aa, a)``."""
    if pair[0] not in word or pair[1] not in word:  # most words of a step: nothing to scan
        return word
    if right_to_left:
        rev: list[bytes] = []
        j = len(word) - 1
        while j >= 0:
            if j >= 1 and (word[j - 1], word[j]) == pair:
                rev.append(word[j - 1] + word[j])
                j -= 2
            else:
                rev.append(word[j])
                j -= 1
        return tuple(reversed(rev))
    out: list[bytes] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def apply_merges(words: Counter[Word], merges: Iterable[Pair]) -> Counter[Word]:
    """The words after applying ``merges`` in order (a replay of training)."""
    for pair in merges:
        nxt: Counter[Word] = Counter()
        for word, n in words.items():
            nxt[merge_word(word, pair)] += n
        words = nxt
    return words


def choose_pair(pairs: Counter[Pair], *, tie: str = "greater") -> Pair | None:
    """The most frequent pair; ties to the greater pair (SPEC) or, known bugs,
    with ``tie="smaller"`` to the smaller one, with ``tie="first"`` to the
    first one counted (``max(stats, key=stats.get)``: words in order of first
    occurrence in the corpus, pairs left to right)."""
    live = [(n, p) for p, n in pairs.items() if n > 0]
    if not live:
        return None
    if tie == "greater":
        return max(live)[1]
    if tie == "first":
        return max(live, key=lambda np: np[0])[1]  # max keeps the first of equal keys
    best = max(n for n, _ in live)
    return min(p for n, p in live if n == best)


def train_from_pretokens(
    pretokens: Counter[bytes],
    num_merges: int,
    *,
    tie: str = "greater",
    right_to_left: bool = False,
) -> list[Pair]:
    """Up to ``num_merges`` merges learned from pre-token frequencies."""
    return train_from_words(words_of(pretokens), num_merges, tie=tie, right_to_left=right_to_left)


def train_from_words(
    words: Counter[Word],
    num_merges: int,
    *,
    tie: str = "greater",
    right_to_left: bool = False,
) -> list[Pair]:
    """Up to ``num_merges`` merges learned from words (tuples of tokens) and
    their frequencies: training from scratch, or continued from a later step."""
    merges: list[Pair] = []
    while len(merges) < num_merges:
        pair = choose_pair(count_pairs(words), tie=tie)
        if pair is None:
            break
        merges.append(pair)
        nxt: Counter[Word] = Counter()
        for word, n in words.items():
            nxt[merge_word(word, pair, right_to_left=right_to_left)] += n
        words = nxt
    return merges


def build_vocab(merges: Sequence[Pair], special_tokens: Sequence[str]) -> dict[int, bytes]:
    """Bytes 0..255 by byte value, then specials in the given order, then one
    token per merge in merge order."""
    vocab = {i: bytes([i]) for i in range(256)}
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    for a, b in merges:
        vocab[len(vocab)] = a + b
    return vocab


class BpeResult(NamedTuple):
    vocab: dict[int, bytes]
    merges: list[Pair]


def train_bpe(
    text: str,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    tie: str = "greater",
    use_pattern: bool = True,
    split_specials: bool = True,
    drop_specials: bool = False,
    right_to_left: bool = False,
    weighted: bool = True,
    ignorecase: bool = False,
) -> BpeResult:
    """SPEC §1.2 ``train_bpe`` on an in-memory text. Defaults are the spec;
    the keywords switch on known bugs (see :func:`count_pretokens`;
    ``weighted=False`` counts each distinct pre-token once)."""
    pretokens = count_pretokens(
        text,
        special_tokens,
        use_pattern=use_pattern,
        split_specials=split_specials,
        drop_specials=drop_specials,
        ignorecase=ignorecase,
    )
    if not weighted:
        pretokens = Counter(dict.fromkeys(pretokens, 1))
    num_merges = vocab_size - 256 - len(special_tokens)
    merges = train_from_pretokens(pretokens, num_merges, tie=tie, right_to_left=right_to_left)
    return BpeResult(build_vocab(merges, special_tokens), merges)


#: Replaying the known bugs costs about len(text) * merges; above this budget
#: (about 2 s of slow training each) failures are reported without those hints.
HINT_BUDGET = 3_000_000

#: On a corpus too big to replay a known bug in full, it must reproduce this
#: many merges after the first difference to be named.
KNOWN_BUG_WINDOW = 8

#: Known bugs the suite can recognise, as ``train_bpe`` keyword sets.
KNOWN_BUGS: dict[str, dict] = {
    "ties broken toward the lexicographically smaller pair (SPEC: prefer the greater pair)": {"tie": "smaller"},
    "ties broken by the order pairs were first counted (max over a dict; SPEC: prefer the greater pair)": {
        "tie": "first"
    },
    "pair counts not weighted by pre-token frequency (each distinct pre-token counted once)": {"weighted": False},
    "pairs counted across pre-token boundaries (no GPT-2 pre-tokenization before counting)": {"use_pattern": False},
    "GPT-2 pattern compiled with re.IGNORECASE (regex.IGNORECASE): upper-case 'S, 'T, 'LL, 'VE, 'M, 'D, 'RE "
    "became contraction pre-tokens; the pattern's contractions are lower-case only": {"ignorecase": True},
    "special tokens were pre-tokenized and counted as ordinary text (split on them first)": {"split_specials": False},
    "special tokens deleted and their neighbours joined, so merges cross special tokens": {"drop_specials": True},
    "a merge replaces occurrences right to left (SPEC: non-overlapping, left to right)": {"right_to_left": True},
}


#: Known bugs of the returned vocabulary (its values: the 256 bytes, the
#: special tokens, one token per merge), each a term left out: replays take
#: ``(merges, special_tokens)`` and give the sorted values such a vocab holds.
VOCAB_BUGS = hints.KnownBugs()


def vocab_values(merges: Sequence[Pair], special_tokens: Sequence[str], *, specials: bool = True) -> list[bytes]:
    """The values of a trained vocab, sorted (``specials=False``: a known bug, the special tokens left out)."""
    values = [bytes([b]) for b in range(256)] + [a + b for a, b in merges]
    return sorted(values + ([s.encode("utf-8") for s in special_tokens] if specials else []))


@VOCAB_BUGS.register(
    "1.2.train_bpe",
    "special tokens left out of the returned vocab (it holds the 256 bytes, the special tokens and the merged tokens)",
)
def _vocab_without_specials(merges, special_tokens):
    return vocab_values(merges, special_tokens, specials=False)


def vocab_causes(vocab: dict, merges: Sequence[Pair], special_tokens: Sequence[str]) -> list[str]:
    """The known vocab bugs whose replay gives exactly ``vocab``'s values."""
    try:
        got = sorted(vocab.values())
    except TypeError:  # values that are not all bytes
        return []
    if got == vocab_values(merges, special_tokens):
        return []
    return [c for c, replay in VOCAB_BUGS.causes("1.2.train_bpe").items() if replay(merges, special_tokens) == got]


def _show(pair: object) -> str:
    return repr(pair) if not isinstance(pair, tuple) else "(" + ", ".join(map(repr, pair)) + ")"


class MergeMismatch(NamedTuple):
    """How a trainer's merges differ from the oracle's: the facts (``lines``:
    the first difference, the counts there, what the wrong merge is made of)
    and the likely causes (``causes``: known bugs whose replay gives the
    trainer's merges). A cause is shown only once a second input confirms it
    (:meth:`text` with the causes both inputs share)."""

    lines: list[str]
    causes: list[str]

    def text(self, causes: Sequence[str] | None = None) -> str:
        shown = self.causes if causes is None else [c for c in self.causes if c in causes]
        found = [f"  {hints.likely_causes(shown)[2:]}"] if shown else []  # several: one ambiguous finding
        return "\n".join(self.lines[:1] + found + self.lines[1:])


def describe_merge_mismatch(
    got: Sequence[object], text: str, vocab_size: int, special_tokens: Sequence[str] = ()
) -> str | None:
    """None when ``got`` equals the slow oracle's merges, else the whole
    description with every likely cause (:func:`merge_mismatch`)."""
    mismatch = merge_mismatch(got, text, vocab_size, special_tokens)
    return None if mismatch is None else mismatch.text()


_CAUSE = "  likely cause: "


def merge_mismatch(
    got: Sequence[object],
    text: str,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    expected: Sequence[Pair] | None = None,
) -> MergeMismatch | None:
    """None when ``got`` equals the slow oracle's merges for this training run;
    otherwise the first differing merge index, both pairs with their counts at
    that step, the top candidates (the facts), and the known bugs that would
    produce exactly ``got`` up to that point (the causes). ``expected``: the
    correct merges when they are known already (the official ones of corpus.en,
    which this oracle reproduces: tests/test_bpe_replay.py), not trained again."""
    expected = train_bpe(text, vocab_size, special_tokens).merges if expected is None else list(expected)
    got = list(got)
    if got == expected:
        return None
    i = next((k for k, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
    pretokens = count_pretokens(text, special_tokens)
    words = apply_merges(words_of(pretokens), expected[:i])
    counts = count_pairs(words)
    g = got[i] if i < len(got) else "<none: training stops here>"
    e = expected[i] if i < len(expected) else "<none: training stops here>"
    lines = [
        f"first difference at merge {i} (got {len(got)} merges, expected {len(expected)}): "
        f"got {_show(g)} (count {counts.get(g, 0) if isinstance(g, tuple) else '-'}), "
        f"expected {_show(e)} (count {counts.get(e, 0) if isinstance(e, tuple) else '-'})",
        "  most frequent pairs at that step: "
        + ", ".join(f"{_show(p)}: {n}" for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
    ]
    if i > 0:
        lines.append("  merges before it agree: ... " + ", ".join(_show(p) for p in expected[max(0, i - 3) : i]))
    # (Counts are those of the merges applied as the spec says; an
    # implementation that applies them otherwise has other counts, so a count
    # of 0 alone proves nothing about it.) What the wrong merge is made of is
    # a fact, not a replayed bug.
    if isinstance(g, tuple) and not any(g[0] + g[1] in p for p in pretokens):
        lines.append(f"  merge {i} makes {g[0] + g[1]!r}, which {_why_absent(g, text, special_tokens)}")
    elif i >= len(expected) and i < len(got):
        lines.append(f"  after merge {i - 1} no pair is left to merge: training stops there (vocab_size is a maximum)")
    causes = []
    for line in _vocab_size_causes(got, expected, words, counts, vocab_size, len(special_tokens)) + _known_bug_causes(
        got, expected, i, text, vocab_size, special_tokens
    ):
        cause = line.removeprefix(_CAUSE)
        if cause.startswith("training stopped after"):  # a fact (with this input's numbers), not a replay
            lines.append(f"  {cause}")
        else:
            causes.append(cause)
    return MergeMismatch(lines, causes)


def _why_absent(pair: tuple[bytes, bytes], text: str, special_tokens: Sequence[str]) -> str:
    """Where the token of a merged pair that occurs in no pre-token comes from."""
    token = pair[0] + pair[1]
    segments = [p.encode("utf-8") for p, special in split_on_specials(text, special_tokens) if not special]
    if any(token in seg for seg in segments):
        return "spans a pre-token boundary (pairs must be counted inside GPT-2 pre-tokens)"
    if token in b"".join(segments):
        return "spans a special token (the corpus is split on special tokens, not stripped of them)"
    if any(token in st.encode("utf-8") for st in special_tokens):
        return "occurs only inside special tokens, which never take part in pair counts"
    return "occurs nowhere in the text between special tokens: a merge is only made of a pair that occurs"


def _vocab_size_causes(
    got: list[object], expected: list[Pair], words: Counter[Word], counts: Counter[Pair], vocab_size: int, k: int
) -> list[str]:
    """vocab_size miscounts, by the prefix property of greedy training: a run
    with a smaller vocab_size makes the first merges of a larger one. With
    one special token (``k``), a miscount of it and an off-by-one in the
    stopping test give the same merges, so the hint names both."""
    full = vocab_size - 256 - k  # merges when no early stop
    extra = len(got) - full
    if len(expected) == full and extra > 0 and got[:full] == expected and got[full:] == train_from_words(words, extra):
        # the first difference is at `full` here: `words` is the state after `expected`
        if extra == k:
            return [
                f"  likely cause: special tokens not counted in vocab_size ({k} merge(s) too many: vocab_size "
                "counts the bytes, the special tokens and the merges)"
                + (", or the stopping test is off by one" if k == 1 else "")
            ]
        if extra == 1:
            return ["  likely cause: the stopping test is off by one (one merge too many)"]
        return []
    if len(got) < len(expected) and got == expected[: len(got)]:
        short = min(len(expected), full) - len(got)
        if k and short == k and len(expected) >= full:
            return [
                f"  likely cause: special tokens subtracted twice from vocab_size ({k} merge(s) too few)"
                + (", or the stopping test is off by one" if k == 1 else "")
            ]
        if short == 1 and len(expected) >= full:
            return ["  likely cause: the stopping test is off by one (one merge too few)"]
        return [
            f"  likely cause: training stopped after {len(got)} merges, before len(vocab) == {vocab_size}, "
            f"while pairs were left (next: {_show(expected[len(got)])}, count "
            f"{counts.get(expected[len(got)], 0)})"
        ]
    return []


def _known_bug_causes(
    got: list[object], expected: list[Pair], i: int, text: str, vocab_size: int, special_tokens: Sequence[str]
) -> list[str]:
    """A known bug is named when replaying it gives the implementation's merges:
    all of them, or (on a big corpus) the first KNOWN_BUG_WINDOW after the
    first difference ``i``; agreeing on the first differing merge alone is
    often a coincidence (two bugs can pick the same pair once)."""
    n = len(got) if len(text) * len(got) <= HINT_BUDGET else min(len(got), i + 1 + KNOWN_BUG_WINDOW)
    if len(text) * n > HINT_BUDGET:
        return []  # replaying known bugs would take too long here
    causes = []
    for cause, bug in KNOWN_BUGS.items():
        if bug.keys() & {"split_specials", "drop_specials"} and not special_tokens:
            continue
        whole = n == len(got)
        variant = train_bpe(text, vocab_size if whole else 256 + len(special_tokens) + n, special_tokens, **bug)
        if (variant.merges == got if whole else variant.merges[:n] == got[:n]) and variant.merges != expected:
            causes.append(f"  likely cause: {cause}")
    return causes
