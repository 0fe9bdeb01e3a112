"""Hypothesis strategies for the tokenizer spec items (SPEC §1): functions
returning strategies, keyword-only bounds, NamedTuples for composites.

Corpora use a small alphabet so that equal pair counts (ties) are the rule,
not the exception, and so that a few dozen merges already build long tokens.
It has letters, a digit, an apostrophe (contractions), punctuation, a space,
a newline (whitespace runs) and a 2-byte character (merges inside UTF-8
sequences). It has no ``\\r``: a trainer may read its file in text mode, where
universal newlines would rewrite it.
"""

import itertools
from typing import NamedTuple

from hypothesis import strategies as st

#: Characters of generated corpora and texts (see module docstring).
SMALL_ALPHABET = "abcs1' !\né"
#: Special tokens used by generated corpora; none is a substring of another.
CORPUS_SPECIALS = ("<|endoftext|>", "<|pad|>")
#: Traps in whitespace handling: GPT-2's `\s+(?!\S)` leaves the last space of
#: a run to the next word.
WHITESPACE_RUNS = ("  ", "   ", "\n\n", " \n ", "\t ", "  \n\n", "\n \n")
MAX_DOCS = 6
MAX_DOC_LEN = 40
MAX_MERGES = 40


class BpeCorpus(NamedTuple):
    text: str
    vocab_size: int
    special_tokens: list[str]


@st.composite
def bpe_corpora(
    draw: st.DrawFn,
    *,
    specials: tuple[str, ...] | None = None,
    max_docs: int = MAX_DOCS,
    max_doc_len: int = MAX_DOC_LEN,
    max_merges: int = MAX_MERGES,
) -> BpeCorpus:
    """A small training corpus, its special tokens and a vocab size.

    Documents over :data:`SMALL_ALPHABET`, joined by special tokens when there
    are any (sometimes several in a row); ``specials=None`` lets Hypothesis
    choose 0, 1 or 2 of :data:`CORPUS_SPECIALS`. The corpus has at least two
    ordinary characters; vocab_size allows 0..max_merges merges.
    """
    if specials is None:
        specials = tuple(
            draw(
                st.lists(st.sampled_from(CORPUS_SPECIALS), unique=True, max_size=2),
                label="specials",
            )
        )
    doc = st.text(SMALL_ALPHABET, max_size=max_doc_len)
    docs = draw(st.lists(doc, min_size=1, max_size=max_docs), label="docs")
    if specials:
        seps = draw(
            st.lists(
                st.lists(st.sampled_from(specials), min_size=1, max_size=2).map("".join),
                min_size=len(docs),
                max_size=len(docs),
            ),
            label="separators",
        )
        text = "".join(d + s for d, s in zip(docs, seps))
    else:
        text = "".join(docs)
    if len("".join(docs)) < 2:
        text = "ab " + text
    merges = draw(st.integers(0, max_merges), label="merges")
    return BpeCorpus(text, 256 + len(specials) + merges, list(specials))


def unicode_text(*, min_size: int = 1, max_size: int = 60) -> st.SearchStrategy[str]:
    """Any Unicode text without lone surrogates (they are not UTF-8 encodable);
    not empty unless ``min_size=0`` (empty input is an edge: STRICT tests)."""
    return st.text(st.characters(exclude_categories=["Cs"]), min_size=min_size, max_size=max_size)


def tokenizer_text(*, specials: tuple[str, ...] = (), max_fragments: int = 12) -> st.SearchStrategy[str]:
    """Text made of fragments that stress pre-tokenization and BPE: runs over
    the small alphabet, whitespace runs, contractions, digits next to letters,
    arbitrary Unicode, and (when given) special tokens, also back to back.
    Never empty (empty input is an edge: STRICT tests)."""
    fragments = [
        st.text(SMALL_ALPHABET, min_size=1, max_size=10),
        st.sampled_from(WHITESPACE_RUNS),
        st.sampled_from(("don't", "we'll", "I'M", "it's", "'re", "x1y22z", "3.14", "😀", "日本語", "naïve café")),
        # Upper-case contractions are not contractions (the pattern is case-sensitive).
        st.sampled_from(("O'Sullivan", "IT'S", "WE'LL", "I'VE", "DON'T", "THEY'RE", "I'D")),
        unicode_text(max_size=4),
    ]
    if specials:
        fragments.append(st.sampled_from(specials))
    return st.lists(st.one_of(*fragments), min_size=1, max_size=max_fragments).map("".join)


@st.composite
def chunkings(draw: st.DrawFn, text: str, *, max_cuts: int = 8) -> list[str]:
    """``text`` cut at Hypothesis-chosen points (repeats give empty chunks);
    ``"".join(result) == text``."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=max_cuts), label="cuts"))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


class ChunkedText(NamedTuple):
    text: str
    chunks: list[str]


@st.composite
def chunked_texts(draw: st.DrawFn, *, specials: tuple[str, ...] = ()) -> ChunkedText:
    """A :func:`tokenizer_text` and a chunking of it (cuts land anywhere:
    inside whitespace runs, characters' neighbours, special tokens)."""
    text = draw(tokenizer_text(specials=specials), label="text")
    return ChunkedText(text, draw(chunkings(text), label="chunks"))


#: Line-structure traps for encode_iterable over a file's lines: blank lines,
#: runs of them, whitespace-only lines, lines that start or end with spaces
#: (GPT-2's `\s+(?!\S)` joins or splits these runs differently when a line
#: is encoded alone).
LINE_BREAKS = ("\n", "\n\n", "\n\n\n", "\n\n\n\n", " \n", "  \n", "\n ", "\n  ", " \n \n", "\t\n", "\n\t")


def file_lines(text: str) -> list[str]:
    """``text`` cut as iterating a file handle cuts it: after every ``"\n"``,
    line endings kept, no empty items (``"a\n\nb"`` -> ``["a\n", "\n", "b"]``)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


class LinedText(NamedTuple):
    text: str
    lines: list[str]


@st.composite
def lined_texts(draw: st.DrawFn, *, specials: tuple[str, ...] = (), max_fragments: int = 16) -> LinedText:
    """A text rich in line breaks (blank lines, whitespace-only lines, spaces
    at line ends and starts, special tokens next to newlines), cut into its
    :func:`file_lines`. No ``"\r"``: a text-mode file never gives one."""
    fragment = st.one_of(st.sampled_from(LINE_BREAKS), tokenizer_text(specials=specials, max_fragments=3))
    text = draw(st.lists(fragment, min_size=1, max_size=max_fragments).map("".join), label="text").replace("\r", "")
    return LinedText(text, file_lines(text))
