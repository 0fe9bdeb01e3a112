"""Oracles for the tokenizer spec items (SPEC §1), computed apart from the
implementation under test.

- GPT-2 files (gpt2_vocab.json / gpt2_merges.txt, printable-unicode form) and
  the official corpus.en training output, decoded to bytes with our own
  inverse of GPT-2's ``bytes_to_unicode``.
- :class:`EncodeOracle`: SPEC §1.3 ``encode`` for any ``(vocab, merges,
  special_tokens)``. Special tokens are split off longest-first, the rest is
  pre-tokenized with the Python ``regex`` module (the spec's engine), and each
  pre-token is BPE-encoded by tiktoken built offline with ranks = merge order
  (``mode="tiktoken"``). ``mode="pairs"`` is the spec's rule read literally in
  pure Python: apply the lowest-rank *merge pair* present until none applies.
  The two agree on every vocabulary a real trainer makes; they can differ on
  degenerate ones (two merges yielding the same bytes), where the spec's two
  sentences disagree, so tests accept either.
- Which id a special token absent from the vocabulary gets is the
  implementation's choice (the handout says "append"; MUST is only "one id not
  otherwise used"): :meth:`EncodeOracle.adopt_special_ids` takes it from the
  implementation when it is such an id, so no encode test assumes an id order.
- :func:`encode_iterable_memory_hint`: the likely cause of a failed memory
  check, computed from measurements at two stream lengths and two kinds of
  stream, never guessed.

Nothing here imports ``reference``.
"""

import functools
import itertools
import json
import operator
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import regex
import tiktoken

from lmspec.conformance import hints
from lmspec.conformance.cs336.oracles.bpe_replay import Pair, merge_word, pretokenize, split_on_specials

EOT = "<|endoftext|>"


# --- GPT-2 printable-unicode form --------------------------------------------
@functools.cache
def gpt2_printable_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: the printable stand-in of each
    byte. Printable non-space Latin-1 bytes stand for themselves; the other 68
    byte values map, in increasing order, to U+0100, U+0101, ..."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    byte_to_char = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in byte_to_char:
            byte_to_char[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in byte_to_char.items()}


def printable_to_bytes(token: str) -> bytes:
    table = gpt2_printable_to_byte()
    return bytes(table[c] for c in token)


def read_printable_vocab(path: Path) -> dict[int, bytes]:
    """A ``{"token": id}`` JSON file in printable form as ``{id: bytes}``.
    (``<|endoftext|>`` is written as itself: printable ASCII stands for itself.)"""
    raw: dict[str, int] = json.loads(path.read_text(encoding="utf-8"))
    return {i: printable_to_bytes(t) for t, i in raw.items()}


def read_printable_merges(path: Path) -> list[Pair]:
    """A merges file, one ``"A B"`` per line in printable form, no header."""
    merges = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        a, b = line.split(" ")
        merges.append((printable_to_bytes(a), printable_to_bytes(b)))
    return merges


@functools.cache
def gpt2_tokenizer_files(fixtures_dir: Path) -> tuple[dict[int, bytes], list[Pair]]:
    """The real GPT-2 tokenizer (50,257 ids, 50,000 merges) as bytes."""
    return read_printable_vocab(fixtures_dir / "gpt2_vocab.json"), read_printable_merges(
        fixtures_dir / "gpt2_merges.txt"
    )


def official_corpus_en_output(fixtures_dir: Path) -> tuple[dict[int, bytes], list[Pair]]:
    """Expected ``train_bpe(corpus.en, 500, ["<|endoftext|>"])`` (official trainer)."""
    return read_printable_vocab(fixtures_dir / "train-bpe-reference-vocab.json"), read_printable_merges(
        fixtures_dir / "train-bpe-reference-merges.txt"
    )


# --- encode oracle -------------------------------------------------------------
def special_token_ids(
    vocab: dict[int, bytes], special_tokens: Sequence[str], chosen: dict[str, int] | None = None
) -> dict[str, int]:
    """SPEC §1.3: a special token keeps its id when its bytes are in ``vocab``;
    an absent one gets the id in ``chosen`` (the implementation's choice), else
    the next free id (in list order, skipping chosen ones)."""
    inverse = {v: k for k, v in sorted(vocab.items(), reverse=True)}  # smallest id wins
    chosen = chosen or {}
    ids: dict[str, int] = {}
    taken = set(vocab) | set(chosen.values())
    nxt = max(taken, default=-1) + 1
    for s in dict.fromkeys(special_tokens):
        b = s.encode("utf-8")
        if b in inverse:
            ids[s] = inverse[b]
        elif s in chosen:
            ids[s] = chosen[s]
        else:
            ids[s] = nxt
            nxt += 1
    return ids


def absent_specials(vocab: dict[int, bytes], special_tokens: Sequence[str]) -> list[str]:
    """The special tokens whose bytes are not a value of ``vocab`` (deduplicated, in order)."""
    values = set(vocab.values())
    return [s for s in dict.fromkeys(special_tokens) if s.encode("utf-8") not in values]


def as_id(x: object) -> int | None:
    """``x`` as a plain int when it is an integer (numpy/torch scalars included), else None."""
    if isinstance(x, bool):
        return None
    try:
        return operator.index(x)  # type: ignore[arg-type]
    except TypeError:
        return None


_TIKTOKEN_CACHE: dict[int, tuple[Sequence[Pair], tiktoken.Encoding]] = {}


def _tiktoken_for_merges(merges: Sequence[Pair]) -> tiktoken.Encoding:
    """Cached per merges object (GPT-2's 50,000 merges take a while)."""
    hit = _TIKTOKEN_CACHE.get(id(merges))
    if hit is not None and hit[0] is merges:
        return hit[1]
    enc = _build_tiktoken(merges)
    if len(merges) > 1000:
        _TIKTOKEN_CACHE[id(merges)] = (merges, enc)
    return enc


def _build_tiktoken(merges: Sequence[Pair]) -> tiktoken.Encoding:
    # Ranks = merge order: single bytes 0..255, merge i -> 256 + i (first
    # creation of a byte string wins). The pattern takes the whole input as one
    # piece: pre-tokenization is done with Python `regex` before calling it.
    ranks = {bytes([b]): b for b in range(256)}
    for i, (a, b) in enumerate(merges):
        ranks.setdefault(a + b, 256 + i)
    return tiktoken.Encoding("lmspec-oracle", pat_str=r"[\s\S]+", mergeable_ranks=ranks, special_tokens={})


def bpe_by_pairs(token: bytes, pair_rank: dict[Pair, int]) -> list[bytes]:
    """SPEC §1.3 literally: while some adjacent pair is a merge, apply the one
    created earliest to every non-overlapping occurrence, left to right."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 1:
        candidates = [(pair_rank[p], p) for p in itertools.pairwise(parts) if p in pair_rank]
        if not candidates:
            break
        parts = list(merge_word(tuple(parts), min(candidates)[1]))
    return parts


class EncodeOracle:
    """Expected ``encode`` output for a tokenizer built from ``(vocab, merges,
    special_tokens)``, as ids (:meth:`encode`) or as byte pieces (:meth:`pieces`;
    a special token is its ``str``)."""

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[Pair], special_tokens: Sequence[str] = ()):
        self.vocab = dict(vocab)
        self._merges_arg = merges  # the caller's object: key of the tiktoken cache
        self.merges = list(merges)
        self.special_tokens = list(special_tokens)
        self.adopted: dict[str, int] = {}
        self._decode: Callable[[list[int]], str] | None = None
        self._set_special_ids()
        self.inverse = {v: k for k, v in sorted(self.vocab.items(), reverse=True)}
        self.pair_rank: dict[Pair, int] = {}
        for i, p in enumerate(self.merges):
            self.pair_rank.setdefault(p, i)
        self._tiktoken: tiktoken.Encoding | None = None

    def _set_special_ids(self) -> None:
        self.special_ids = special_token_ids(self.vocab, self.special_tokens, self.adopted)
        self.full_vocab = dict(self.vocab) | {i: s.encode("utf-8") for s, i in self.special_ids.items()}

    def adopt_special_ids(
        self, encode: Callable[[str], Sequence[int]], decode: Callable[[list[int]], str] | None = None
    ) -> None:
        """Expect, for each special token absent from ``vocab``, the id the
        implementation gives it (``encode(special)``), when that is one id
        that no token of ``vocab`` and no other special has. Otherwise keep
        the next free id: the implementation's tokens then disagree with the
        oracle, and the special-token tests say why. ``decode`` (the
        implementation's) shows ids outside ``vocab`` in failure messages as
        the implementation knows them, not as the oracle numbered them."""
        self._decode = decode
        taken = set(self.vocab)
        for s in absent_specials(self.vocab, self.special_tokens):
            try:
                ids = list(encode(s))
            except Exception:
                continue
            i = as_id(ids[0]) if len(ids) == 1 else None
            if i is not None and i not in taken:
                self.adopted[s] = i
                taken.add(i)
        self._set_special_ids()

    @property
    def tiktoken(self) -> tiktoken.Encoding:
        if self._tiktoken is None:
            self._tiktoken = _tiktoken_for_merges(self._merges_arg)
        return self._tiktoken

    def pretoken_pieces(self, pretoken: str, mode: str = "tiktoken") -> list[bytes]:
        if mode == "pairs":
            return bpe_by_pairs(pretoken.encode("utf-8"), self.pair_rank)
        enc = self.tiktoken
        return [enc.decode_single_token_bytes(r) for r in enc.encode_ordinary(pretoken)]

    def pieces(self, text: str, mode: str = "tiktoken") -> list[bytes | str]:
        out: list[bytes | str] = []
        for segment, special in split_on_specials(text, self.special_tokens):
            if special:
                out.append(segment)
                continue
            for pretoken in pretokenize(segment):
                out.extend(self.pretoken_pieces(pretoken, mode))
        return out

    def encode(self, text: str, mode: str = "tiktoken") -> list[int]:
        return [self.special_ids[p] if isinstance(p, str) else self.inverse.get(p, -1) for p in self.pieces(text, mode)]

    def piece_of(self, token_id: int) -> bytes:
        """The bytes of an id (specials included); unknown ids as a marker."""
        return self.full_vocab.get(token_id, f"<unknown id {token_id}>".encode())

    def got_piece(self, token_id: int) -> bytes:
        """The bytes of an id the implementation returned, in the
        implementation's numbering: ``vocab``'s when the id is one of its
        ids (the implementation was given it), else what the implementation's
        own decode makes of it (an added special token)."""
        if token_id in self.vocab:
            return self.vocab[token_id]
        if self._decode is not None:
            try:
                return str(self._decode([token_id])).encode("utf-8", errors="replace")
            except Exception:
                return f"<id {token_id}: decode raised>".encode()
        return self.piece_of(token_id)

    def same_tokens(self, got: Sequence[int], expected: Sequence[int]) -> bool:
        """Equal ids, or equal bytes where ``vocab`` maps several ids to the
        same bytes (the spec does not say which of those ids encode returns)."""
        if list(got) == list(expected):
            return True
        if len(got) != len(expected):
            return False
        specials = set(self.special_ids.values())
        for g, e in zip(got, expected):
            if g == e:
                continue
            if g in specials or e in specials or g not in self.vocab or self.vocab[g] != self.vocab[e]:
                return False
        return True

    def mismatch(self, got: Sequence[int], text: str) -> str | None:
        """None when ``got`` is a correct encoding of ``text`` (by tiktoken or
        by the literal pair rule), else a description of the first difference."""
        expected = self.encode(text)
        if self.same_tokens(got, expected):
            return None
        literal = self.encode(text, "pairs")
        if self.same_tokens(got, literal):
            return None
        got_pieces = [self.got_piece(i) for i in got]
        want_pieces = [self.piece_of(i) for i in expected]
        first = next(
            (k for k, (g, w) in enumerate(zip(got_pieces, want_pieces)) if g != w),
            min(len(got_pieces), len(want_pieces)),
        )
        lo = max(0, first - 3)
        return (
            f"first difference at token {first} (of {len(got)} vs {len(expected)} expected): "
            f"got {got[lo : first + 4]} = {got_pieces[lo : first + 4]}, "
            f"expected {expected[lo : first + 4]} = {want_pieces[lo : first + 4]}"
        )


# --- known encode bugs, for "likely cause" hints ---------------------------------
_NO_LOOKAHEAD = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+""")
_CASELESS = regex.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""", regex.IGNORECASE
)


def _bpe_first_position(token: bytes, pair_rank: dict[Pair, int]) -> list[bytes]:
    # Bug: merge the leftmost pair that is any merge, instead of the lowest rank.
    parts = [bytes([b]) for b in token]
    while True:
        at = next((i for i, p in enumerate(itertools.pairwise(parts)) if p in pair_rank), None)
        if at is None:
            return parts
        parts[at : at + 2] = [parts[at] + parts[at + 1]]


def buggy_pieces(oracle: EncodeOracle, text: str, bug: str) -> list[bytes | str]:
    """What ``encode`` gives with one known bug (see :data:`ENCODE_BUGS`)."""
    specials = oracle.special_tokens
    if bug == "specials_as_text":
        runs = [(text, False)] if text else []
    elif bug == "shortest_special":
        runs = split_on_specials(text, specials, shortest_first=True)
    elif bug == "absent_specials_as_text":
        runs = split_on_specials(text, [s for s in specials if s not in absent_specials(oracle.vocab, specials)])
    else:
        runs = split_on_specials(text, specials)
    out: list[bytes | str] = []
    for segment, special in runs:
        if special:
            out.append(segment)
            continue
        if bug == "no_pretokenize":
            pretokens = [segment]
        elif bug == "no_lookahead":
            pretokens = _NO_LOOKAHEAD.findall(segment)
        elif bug == "ignorecase":
            pretokens = _CASELESS.findall(segment)
        else:
            pretokens = pretokenize(segment)
        for p in pretokens:
            if bug == "first_position":
                out.extend(_bpe_first_position(p.encode("utf-8"), oracle.pair_rank))
            else:
                out.extend(oracle.pretoken_pieces(p))
    return out


ENCODE_BUGS: dict[str, str] = {
    "first_position": "merges applied at the leftmost position where any merge applies, not lowest rank first",
    "no_pretokenize": "no GPT-2 pre-tokenization: merges applied across pre-token boundaries",
    "no_lookahead": "pre-tokenization pattern lacks `\\s+(?!\\S)`: the last space of a run must start the next word",
    "ignorecase": "GPT-2 pattern compiled with re.IGNORECASE (regex.IGNORECASE): upper-case 'S, 'T, 'LL, "
    "'VE, 'M, 'D, 'RE became contraction pre-tokens; the pattern's contractions are lower-case only "
    "(O'Sullivan is O | ' | Sullivan)",
    "specials_as_text": "special tokens not split off before pre-tokenization",
    "shortest_special": "shorter special token matched first; the longest match must win",
    "absent_specials_as_text": "special tokens absent from the vocabulary are not added: they stay ordinary text",
}


def encode_hints(oracle: EncodeOracle, got: Sequence[int], text: str) -> list[str]:
    got_pieces = [oracle.got_piece(i) for i in got]
    specials = set(oracle.special_ids.values())
    hints = []
    for bug, cause in ENCODE_BUGS.items():
        if bug == "absent_specials_as_text" and not absent_specials(oracle.vocab, oracle.special_tokens):
            continue
        try:
            pieces = buggy_pieces(oracle, text, bug)
        except Exception:
            continue
        flat = [p.encode("utf-8") if isinstance(p, str) else p for p in pieces]
        is_special = [isinstance(p, str) for p in pieces]
        if flat == got_pieces and is_special == [i in specials for i in got]:
            hints.append(cause)
    return hints


# --- known special-token id bugs (1.3.special_tokens), for "likely cause" hints -------
#: The degrees of freedom of "a special token absent from the vocabulary is
#: added with one id no other token has": its id (a lookup default, one "next
#: free id" shared by all, an id not added), and whether it is split off at all.
#: Each replay takes ``(vocab, merges, special_tokens)`` and returns what
#: ``encode(s)`` gives for every special token ``s`` (:func:`special_outcomes`).
KNOWN_BUGS = hints.KnownBugs()

_RAISES_KEYERROR = "raises KeyError"


def _special_replay(vocab: dict[int, bytes], merges: Sequence[Pair], special_tokens: Sequence[str], absent_as) -> dict:
    """Every special's ``encode(s)``: a present one its id, an absent one ``absent_as(s)``."""
    inverse = {v: k for k, v in sorted(vocab.items(), reverse=True)}
    return {
        s: [inverse[s.encode("utf-8")]] if s.encode("utf-8") in inverse else absent_as(s)
        for s in dict.fromkeys(special_tokens)
    }


@KNOWN_BUGS.register(
    "1.3.special_tokens",
    "absent special tokens never added: their ids looked up with a default (token_to_id.get(token, 0)), "
    "so each encodes to id 0, a byte of the vocabulary",
)
def _absent_special_default_zero(vocab, merges, special_tokens):
    return _special_replay(vocab, merges, special_tokens, lambda s: [0])


@KNOWN_BUGS.register(
    "1.3.special_tokens",
    "the next free id computed once (max id + 1) and given to every absent special token: they share one id",
)
def _absent_specials_one_id(vocab, merges, special_tokens):
    nxt = max(vocab, default=-1) + 1
    return _special_replay(vocab, merges, special_tokens, lambda s: [nxt])


@KNOWN_BUGS.register(
    "1.3.special_tokens",
    "special ids looked up in the vocabulary as given, where an absent special token is not: encode raises KeyError",
)
def _absent_special_keyerror(vocab, merges, special_tokens):
    return _special_replay(vocab, merges, special_tokens, lambda s: _RAISES_KEYERROR)


@KNOWN_BUGS.register(
    "1.3.special_tokens", "special tokens absent from the vocabulary are not added: they stay ordinary text"
)
def _absent_specials_as_text(vocab, merges, special_tokens):
    plain = EncodeOracle(vocab, merges, ())
    return _special_replay(vocab, merges, special_tokens, plain.encode)


@KNOWN_BUGS.register(
    "1.3.special_tokens", "special tokens not split off before pre-tokenization: each is ordinary text"
)
def _specials_as_text(vocab, merges, special_tokens):
    plain = EncodeOracle(vocab, merges, ())
    return {s: plain.encode(s) for s in dict.fromkeys(special_tokens)}


def special_outcomes(encode: Callable[[str], Sequence[int]], special_tokens: Sequence[str]) -> dict:
    """What ``encode(s)`` gives for each special token ``s``: its ids, or
    ``"raises KeyError"`` (``"raises OtherError"``) where it raises."""
    out: dict = {}
    for s in dict.fromkeys(special_tokens):
        try:
            out[s] = [as_id(i) for i in encode(s)]
        except KeyError:
            out[s] = _RAISES_KEYERROR
        except Exception as exc:  # the implementation's exception, as a fact
            out[s] = f"raises {type(exc).__name__}"
    return out


def special_id_causes(
    encode: Callable[[str], Sequence[int]],
    vocab: dict[int, bytes],
    merges: Sequence[Pair],
    special_tokens: Sequence[str],
) -> list[str]:
    """The known special-token bugs whose replay gives what ``encode`` gives
    for every special token (present and absent ones alike)."""
    got = special_outcomes(encode, special_tokens)
    return [
        cause
        for cause, replay in KNOWN_BUGS.causes("1.3.special_tokens").items()
        if replay(vocab, merges, special_tokens) == got
    ]


# --- known decode bugs (1.3.decode) ----------------------------------------------
# The degrees of freedom of "concatenate the ids' bytes, then decode UTF-8 with
# errors='replace'": the errors mode, the order (decode per id, then join) and
# what an id outside the vocabulary becomes. Replays take ``(vocab, ids)``
# (``vocab`` with the special tokens) and return the string; one that raises
# cannot be the implementation's output.


def _joined(vocab: dict[int, bytes], ids: Sequence[int], unknown: bytes | None = None) -> bytes:
    return b"".join(vocab[i] if unknown is None or i in vocab else unknown for i in ids)


@KNOWN_BUGS.register("1.3.decode", "errors='ignore' (malformed bytes must become U+FFFD, not vanish)")
def _decode_errors_ignore(vocab, ids):
    return _joined(vocab, ids).decode("utf-8", errors="ignore")


@KNOWN_BUGS.register("1.3.decode", "each id's bytes decoded on their own, then joined")
def _decode_per_id(vocab, ids):
    return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)


@KNOWN_BUGS.register("1.3.decode", "an id outside the vocabulary skipped (vocab.get(i, b'')) instead of raising")
def _decode_skips_unknown(vocab, ids):
    return _joined(vocab, ids, b"").decode("utf-8", errors="replace")


@KNOWN_BUGS.register("1.3.decode", "an id outside the vocabulary decoded as U+FFFD instead of raising")
def _decode_unknown_replacement(vocab, ids):
    return _joined(vocab, ids, "\ufffd".encode()).decode("utf-8", errors="replace")


@KNOWN_BUGS.register(
    "1.3.decode",
    "the vocabulary indexed as a list: a negative id wraps around to the end (-1 is the last id) instead of raising",
)
def _decode_negative_wraps(vocab, ids):
    n = max(vocab) + 1
    return _joined(vocab, [n + i if i < 0 else i for i in ids]).decode("utf-8", errors="replace")


def decode_causes(vocab: dict[int, bytes], ids: Sequence[int], got: str) -> list[str]:
    """The known decode bugs whose replay on ``ids`` gives ``got``."""
    causes = []
    for cause, replay in KNOWN_BUGS.causes("1.3.decode").items():
        try:
            replayed = replay(vocab, ids)
        except (KeyError, IndexError):  # the bug would raise here: it is not this output
            continue
        if replayed == got:
            causes.append(cause)
    return causes


#: The second input of every encode test, on which a likely cause must be
#: confirmed before it is shown: what the known bugs change (contractions,
#: upper-case ones, whitespace runs, digits, merges; ")'s" is three pre-tokens
#: whatever the case, which no pre-tokenization at all merges), with the tokenizer's
#: special tokens inserted back to back (:func:`second_encode_text`).
SECOND_ENCODE_TEXT = "O'Sullivan said: IT'S 12 o'clock,  we'll\n\n see   don't, 3.14 naïve café (it)'s"


def second_encode_text(oracle: EncodeOracle, text: str) -> str:
    """:data:`SECOND_ENCODE_TEXT` with each special token twice in a row in the
    middle (longest match), never the failing text itself."""
    middle = "".join(s + s + " " for s in oracle.special_tokens)
    second = SECOND_ENCODE_TEXT[:28] + middle + SECOND_ENCODE_TEXT[28:]
    return second if second != text else second + " again"


def _wrong_encode_hints(oracle: EncodeOracle, encode: Callable[[str], Sequence[int]], text: str) -> list[str]:
    """The known bugs whose replay gives ``encode(text)``, where that is wrong
    (a replay that is right there, as a right encode is, is no evidence)."""
    got = list(encode(text))
    return [] if oracle.mismatch(got, text) is None else encode_hints(oracle, got, text)


def assert_encodes(
    oracle: EncodeOracle,
    got: Sequence[int],
    text: str,
    *,
    rule: str,
    encode: Callable[[str], Sequence[int]] | None = None,
    second_case: "Callable[[], tuple[EncodeOracle, Callable[[str], Sequence[int]]]] | None" = None,
) -> None:
    """``got`` is the SPEC §1.3 encoding of ``text`` (tiktoken or literal pair
    rule). A likely cause is named when its replay gives ``got`` and, on the
    second input (:func:`second_encode_text`), what ``encode`` (the
    implementation's) gives there; without ``encode`` none is named.
    ``second_case``: gives the oracle and encode of another tokenizer of the
    implementation's to take the second input to (where no text tells this
    tokenizer's switches apart), built only when a cause needs confirming."""
    __tracebackhide__ = True
    got = list(got)
    problem = oracle.mismatch(got, text)
    if problem is None:
        return
    causes: list[str] = []
    if encode is not None:

        def again() -> list[str]:
            other, other_encode = second_case() if second_case else (oracle, encode)
            return _wrong_encode_hints(other, other_encode, second_encode_text(other, text))

        causes = hints.confirmed(encode_hints(oracle, got, text), again)
    lines = [f"{rule}: {problem}{hints.likely_causes(causes)}"]  # several: one ambiguous finding
    lines.append(f"  input: {text[:300]!r}{'...' if len(text) > 300 else ''} (special tokens {oracle.special_tokens})")
    raise AssertionError("\n".join(lines))


# --- vocabularies the tokenizer tests use ----------------------------------------
_MULTILINGUAL = (
    "Grüße aus München! Die Straße ist naß, der Käse ist würzig.\n"
    "Café crème, naïve façade, déjà vu — voilà.\n"
    "Москва — столица России. 東京は日本の首都です。 😀😀 👍🏽 emoji!\n"
    "She said \"don't\" and we'll see; they're here, I've got 1234 things, 3.14159.\n"
)


@functools.cache
def sample_training_text(limit: int = 12_000) -> str:
    """Deterministic training text that every Python ships: documentation
    topics from ``pydoc_data``, plus multilingual lines written for the suite
    (so merges form inside multi-byte characters), documents separated by
    ``<|endoftext|>``."""
    import pydoc_data.topics

    docs, size = [], 0
    for key in sorted(pydoc_data.topics.topics):
        doc = pydoc_data.topics.topics[key][:1500]
        docs.append(doc)
        docs.append(_MULTILINGUAL)
        size += len(doc) + len(_MULTILINGUAL)
        if size >= limit:
            break
    return EOT.join(docs)


@functools.cache
def slow_trained_vocab() -> tuple[dict[int, bytes], list[Pair]]:
    """The slow oracle trainer on :func:`sample_training_text`, 200 merges."""
    from lmspec.conformance.cs336.oracles.bpe_replay import train_bpe

    result = train_bpe(sample_training_text(), 256 + 1 + 200, [EOT])
    return result.vocab, result.merges


# --- encode_iterable memory (SHOULD): streams and the likely cause of a failure ----
def memory_stream_lines(chars: int, *, fresh: bool = True) -> Iterator[str]:
    """About ``chars`` characters of real text, one line per item, each a new
    ``str`` object (as a file handle gives). ``fresh``: every line starts with
    a new number, so the stream's distinct pre-tokens grow with its length as
    real text's do; otherwise the same few dozen lines repeat, and no new
    pre-token appears after the first few thousand characters."""
    unit = sample_training_text()[:4000].splitlines(keepends=True)
    sent = 0
    for n, line in enumerate(itertools.cycle(unit), start=10**6):
        if sent >= chars:
            return
        line = f"{n} {line}" if fresh else line.encode("utf-8").decode("utf-8")
        sent += len(line)
        yield line


def _grows(full_kib: float, half_kib: float, bound_kib: float) -> bool:
    """Growth measured on a stream and on its first half differ by more than
    measurement noise and by a good part of the whole: memory scales with length."""
    return full_kib - half_kib > max(bound_kib / 2, full_kib / 4)


def encode_iterable_memory_hint(
    growth_kib: Callable[[int, bool], float],
    *,
    stream_chars: int,
    observed_kib: float,
    bound_kib: float,
) -> str | None:
    """The likely cause of a failed SHOULD memory check, or None when the
    measurements match no known cause.

    ``observed_kib`` is the peak-memory growth the check measured (above
    ``bound_kib``) while the implementation encoded
    ``memory_stream_lines(stream_chars, fresh=True)``; ``growth_kib(chars,
    fresh)`` measures the same on ``memory_stream_lines(chars, fresh=fresh)``.
    Two or three more measurements tell the causes apart by what they scale
    with, instead of guessing from the size alone:

    - the stream, its lines or its ids kept: grows with the length even when
      the lines repeat;
    - a pre-token cache that keeps every pre-token met (unbounded, or bounded
      above this stream's distinct pre-tokens): grows with the length of the
      fresh stream, small when the lines repeat;
    - a bounded cache or buffer that is simply larger than the allowance
      (an LRU cache of many entries, a big read buffer): the same for half the
      stream as for all of it.
    """
    half = growth_kib(stream_chars // 2, True)
    # Twice the length: memory freed by the runs before is reused without
    # raising the peak again, so a run shorter than the first can hide what
    # it keeps; memory kept per character outgrows that on a longer run.
    repeated = growth_kib(2 * stream_chars, False)
    fresh_grows = _grows(observed_kib, half, bound_kib)
    figures = (
        f"(peak growth {observed_kib:.0f} KiB on the stream, {half:.0f} KiB on its first half, "
        f"{repeated:.0f} KiB on a stream twice as long whose lines repeat"
    )
    if repeated > bound_kib:
        return _cause_when_repeats_exceed(growth_kib, stream_chars, repeated, fresh_grows, bound_kib, figures)
    if fresh_grows:
        return (
            "a pre-token cache that keeps every distinct pre-token met (unbounded, or bounded above what this "
            "stream holds): memory grows with the length of a stream of new pre-tokens and stays small when "
            f"its lines repeat {figures})"
        )
    return (
        "a bounded pre-token cache (e.g. an LRU of many entries) whose full size exceeds the allowance: memory "
        "is the same for half the stream, and small when no new pre-token appears; bound the cache lower "
        f"{figures})"
    )


def _cause_when_repeats_exceed(
    growth_kib: Callable[[int, bool], float],
    stream_chars: int,
    repeated: float,
    fresh_grows: bool,
    bound_kib: float,
    figures: str,
) -> str:
    """The cause when even a stream of repeating lines exceeds the allowance:
    something kept per character (it grows with the repeating stream too), or a
    fixed cost (with or without a growing cache besides)."""
    repeated_half = growth_kib(stream_chars, False)
    figures += f", {repeated_half:.0f} KiB on half of that"
    if _grows(repeated, repeated_half, bound_kib):
        return (
            f"something proportional to the stream is kept (its text, its lines or its ids): memory grows "
            f"with the stream's length even when no new pre-token appears {figures})"
        )
    if fresh_grows:
        return (
            "a fixed cost above the allowance (the same whatever the length of a repeating stream), plus a "
            f"pre-token cache that grows with the distinct pre-tokens met {figures})"
        )
    return (
        "a fixed-size buffer or structure larger than the allowance: memory is the same for half the stream, "
        f"and the same when no new pre-token appears {figures})"
    )
