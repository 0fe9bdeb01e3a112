"""SPEC §1.3 encode (and §1.1 pre-tokenization as seen by encode).

Oracle: conformance/cs336/oracles/tokenizer.py — special tokens split off longest
first, GPT-2 pre-tokenization with Python ``regex``, and rank-based BPE by
tiktoken built offline with ranks = merge order (or the spec's pair rule
read literally; either is accepted). Vocabularies: the real GPT-2 files
(fixtures), the implementation's own trainer on a built-in text, and the slow
oracle trainer on the same text or on Hypothesis corpora.

The tokenizer fixtures below are shared by test_tokenizer_*.py.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import example, given

from lmspec.conformance import hints
from lmspec.conformance.asserts import assert_equal
from lmspec.conformance.cs336.oracles import bpe_replay
from lmspec.conformance.cs336.oracles.tokenizer import (
    EOT,
    EncodeOracle,
    assert_encodes,
    gpt2_tokenizer_files,
    sample_training_text,
    slow_trained_vocab,
)
from lmspec.conformance.cs336.strategies.tokenizer import BpeCorpus, bpe_corpora, tokenizer_text, unicode_text
from lmspec.conformance.plain import raised

#: Fixture texts of the official tokenizer tests (the last two: a special
#: token followed by newlines, added in handout 1.0.3/1.0.4).
FIXTURE_TEXTS = (
    "address.txt",
    "german.txt",
    "tinystories_sample.txt",
    "special_token_trailing_newlines.txt",
    "special_token_double_newlines_non_whitespace.txt",
)
#: Traps pinned on every Unicode property test (never the empty text: an
#: edge, checked by STRICT tests of its own).
TRAPS = (" ", "  \n\n", "a\n\nb", "don't", "😀", EOT, "a1b22 c333d", "x  y", "\t\n \n", "O'Sullivan IT'S WE'LL")


def pin_traps(test):
    """``@example(text=t)`` for every trap in :data:`TRAPS` (put above ``@given``)."""
    for trap in TRAPS:
        test = example(text=trap)(test)
    return test


class Case(NamedTuple):
    """A tokenizer under test and the oracle built from the same inputs."""

    name: str
    tokenizer: Any
    oracle: EncodeOracle

    def __repr__(self) -> str:  # short, for Hypothesis' falsifying-example line
        return f"Case({self.name!r}, special_tokens={self.oracle.special_tokens})"


_CASES: dict[tuple, Case] = {}


def make_case(get_tokenizer, name: str, vocab: dict, merges: list, specials: Sequence[str] | None) -> Case:
    """Build (once per session) the implementation's tokenizer from copies of
    ``vocab``/``merges``, and the oracle from the originals. Special tokens
    absent from ``vocab`` get the ids the implementation chose, when those are
    valid (SPEC §1.3 does not fix them; test_tokenizer_specials.py checks them)."""
    key = (id(get_tokenizer), name, tuple(specials) if specials is not None else None)
    if key not in _CASES:
        tok = get_tokenizer(dict(vocab), list(merges), list(specials) if specials is not None else None)
        oracle = EncodeOracle(vocab, merges, specials or ())
        oracle.adopt_special_ids(tok.encode, tok.decode)
        _CASES[key] = Case(name, tok, oracle)
    return _CASES[key]


def gpt2_case(get_tokenizer, fixtures_dir: Path, specials: Sequence[str] | None = (EOT,)) -> Case:
    vocab, merges = gpt2_tokenizer_files(fixtures_dir)
    return make_case(get_tokenizer, "gpt2", vocab, merges, specials)


def slow_case(get_tokenizer, specials: Sequence[str] | None = (EOT,)) -> Case:
    vocab, merges = slow_trained_vocab()
    return make_case(get_tokenizer, "slow", vocab, merges, specials)


#: The implementation's own trainer output, or why it cannot be used, per trainer.
_OWN: dict[int, tuple[dict, list] | str] = {}


def _own_vocab(request: pytest.FixtureRequest) -> tuple[dict, list]:
    """``run_train_bpe`` of the implementation on the built-in text (200
    merges), or a skip. A trainer that is missing, raises, or returns something
    the tokenizer cannot be built from costs only the 1.2 items: the case is
    skipped with the reason (never "not implemented", which would count
    against the tokenizer item), and encode is still checked on the GPT-2 and
    slow-oracle vocabularies."""
    try:
        train = request.getfixturevalue("run_train_bpe")
    except pytest.skip.Exception as exc:
        pytest.skip(f"no own vocabulary to encode with ({exc.msg}); encode is checked on the GPT-2 vocabulary")
    key = id(getattr(train, "__wrapped__", train))
    if key not in _OWN:
        path = request.getfixturevalue("tmp_path_factory").mktemp("own_training") / "sample_training_text.txt"
        path.write_bytes(sample_training_text().encode("utf-8"))
        try:
            vocab, merges = train(input_path=path, vocab_size=256 + 1 + 200, special_tokens=[EOT])
            _OWN[key] = usable_vocab(dict(vocab), [tuple(m) for m in merges])
        except pytest.skip.Exception as exc:  # NotImplementedError
            _OWN[key] = str(exc.msg)
        except (Exception, pytest.fail.Exception) as exc:  # its exception, or a crash or timeout of the worker
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            _OWN[key] = f"run_train_bpe failed: {first or type(exc).__name__}"
    own = _OWN[key]
    if isinstance(own, str):
        pytest.skip(f"no own vocabulary to encode with ({own}; see 1.2); encode is checked on the GPT-2 vocabulary")
    return own


def usable_vocab(vocab: dict, merges: list) -> tuple[dict, list] | str:
    """``(vocab, merges)`` when they have the shape SPEC §1.2 gives a
    trainer's output (ids 0..len-1, distinct bytes values, every single byte,
    each merge's parts and result in the vocab), else what is wrong with them."""
    if not all(isinstance(i, int) and isinstance(b, bytes) for i, b in vocab.items()):
        return "own vocab is not a dict[int, bytes]"
    if sorted(vocab) != list(range(len(vocab))):
        return "own vocab ids are not 0..len-1"
    values = set(vocab.values())
    if len(values) != len(vocab):
        return "own vocab repeats a value"
    if not all(bytes([b]) in values for b in range(256)):
        return "own vocab lacks some of the 256 single bytes"
    bad = [m for m in merges if len(m) != 2 or not all(isinstance(x, bytes) for x in m)]
    bad = bad or [m for m in merges if not {m[0], m[1], m[0] + m[1]} <= values]
    if bad:
        return f"own merges do not fit the own vocab, e.g. {bad[0]!r}"
    return vocab, merges


def own_case(get_tokenizer, request: pytest.FixtureRequest, specials: Sequence[str] | None = (EOT,)) -> Case:
    """The implementation's tokenizer on its own trainer's output: whatever id
    order that trainer chose (specials first or last, merges in any order)."""
    vocab, merges = _own_vocab(request)
    return make_case(get_tokenizer, "own", vocab, merges, specials)


@pytest.fixture(params=["gpt2", "slow"], scope="session")
def case(request: pytest.FixtureRequest, get_tokenizer) -> Case:
    """GPT-2 (fixtures) or slow-trained tokenizer, with <|endoftext|> special."""
    if request.param == "gpt2":
        return gpt2_case(get_tokenizer, request.getfixturevalue("fixtures_dir"))
    return slow_case(get_tokenizer)


def read_fixture_text(fixtures_dir: Path, name: str) -> str:
    return (fixtures_dir / name).read_text(encoding="utf-8")


# --- encode ------------------------------------------------------------------------
@pytest.mark.spec("1.3.encode")
@pytest.mark.parametrize("specials", [None, [EOT]], ids=["no_specials", "eot_special"])
@pytest.mark.parametrize("name", FIXTURE_TEXTS)
@pytest.mark.parametrize("source", ["gpt2", "own"])
def test_encode_matches_tiktoken_on_fixture_texts(request, get_tokenizer, fixtures_dir, source, name, specials):
    """encode(text) equals tiktoken built from the same merges (ranks = merge
    order), for GPT-2's files and for the implementation's own trained merges
    (any id order; skipped when the implementation's trainer fails: see 1.2)."""
    if source == "gpt2":
        c = gpt2_case(get_tokenizer, fixtures_dir, specials)
    else:
        c = own_case(get_tokenizer, request, specials)
    text = read_fixture_text(fixtures_dir, name)
    assert_encodes(
        c.oracle,
        c.tokenizer.encode(text),
        text,
        rule=f"SPEC 1.3: encode({name}) with {c.name} merges",
        encode=c.tokenizer.encode,
    )


@pytest.mark.spec("1.3.encode")
@pin_traps
@given(text=unicode_text() | tokenizer_text(specials=(EOT,)))
@example(text="".join(TRAPS))
@example(text="Hello, world! It's 2024 — ça va? 😀\n\n  ")
def test_encode_matches_tiktoken_on_unicode_text(case: Case, text: str):
    """encode equals rank-based BPE (tiktoken) on arbitrary Unicode text."""
    assert_encodes(
        case.oracle,
        case.tokenizer.encode(text),
        text,
        rule=f"SPEC 1.3: encode with {case.name} merges",
        encode=case.tokenizer.encode,
    )


@pytest.mark.spec("1.3.encode")
@given(corpus=bpe_corpora(), text=tokenizer_text(specials=("<|endoftext|>", "<|pad|>")))
@example(corpus=BpeCorpus("aaa aaaa aa", 262, []), text="aaaaaaa aaa")  # overlapping merges
@example(corpus=BpeCorpus("ab abab bab", 262, []), text="ababab bab")
def test_encode_matches_rank_bpe_on_small_vocabularies(get_tokenizer, corpus: BpeCorpus, text: str):
    """On vocabularies trained (by the slow oracle) from tiny corpora, where
    ties and repeated characters are common, encode applies the earliest
    applicable merge first until none applies."""
    trained = bpe_replay.train_bpe(*corpus)
    tok = get_tokenizer(dict(trained.vocab), list(trained.merges), list(corpus.special_tokens))
    oracle = EncodeOracle(trained.vocab, trained.merges, corpus.special_tokens)
    assert_encodes(
        oracle, tok.encode(text), text, rule=f"SPEC 1.3: encode with merges {trained.merges[:8]}...", encode=tok.encode
    )


NO_MERGES = "an empty merge list is not supported (e.g. zip(*merges) or merges[0] on []): with one merge it builds"


def _no_merges_causes(get_tokenizer) -> list[str]:
    """The second input: the identity vocabulary, with no merge (the bug
    raises) and with one merge (it builds and encodes)."""
    vocab = {i: bytes([i]) for i in range(256)}
    try:
        get_tokenizer(dict(vocab), [], None)
    except Exception:
        one = get_tokenizer(vocab | {256: b"ab"}, [(b"a", b"b")], None)
        return [NO_MERGES] if list(one.encode("abc")) == [256, ord("c")] else []
    return []


@pytest.mark.spec("1.3.encode")
def test_encode_with_no_merges_is_one_id_per_byte(get_tokenizer):
    """A tokenizer built with an empty merge list (what train_bpe returns at
    vocab_size = 256 + specials) encodes every byte to its own id."""
    vocab = {i: bytes([(i * 7 + 3) % 256]) for i in range(256)}
    inverse = {b: i for i, b in vocab.items()}
    try:
        tok = get_tokenizer(dict(vocab), [], None)
    except Exception as exc:
        causes = hints.confirmed([NO_MERGES], lambda: _no_merges_causes(get_tokenizer))
        raise AssertionError(
            f"SPEC 1.3: get_tokenizer(vocab of the 256 bytes, merges=[], None) raised {raised(exc)}: "
            f"a tokenizer without merges must work{hints.likely_causes(causes)}"
        ) from None
    text = "don't 42 naïve 😀\n\n"
    assert_equal(
        list(tok.encode(text)),
        [inverse[bytes([b])] for b in text.encode("utf-8")],
        rule="SPEC 1.3: encode with no merges gives one id per byte",
        context=f"text {text!r}, vocab {{i: bytes([(7 * i + 3) % 256])}}, merges []",
    )


@pytest.mark.spec("1.3.encode")
@pytest.mark.strict
def test_encode_empty_text_is_empty(get_tokenizer):
    """STRICT: encode("") == [] (empty input is an edge the handout never names)."""
    assert_equal(
        list(slow_case(get_tokenizer).tokenizer.encode("")),
        [],
        rule="SPEC 1.3: encode of empty text",
    )


# --- pre-tokenization, seen through encode ---------------------------------------------
#: Merges that join an apostrophe to the letters after it, upper and lower
#: case. A case-sensitive pattern (tiktoken's, the handout's) never lets the
#: upper-case ones apply: ``O'Sullivan`` is ``O | ' | Sullivan``.
_APOSTROPHE_MERGES = [
    (b"'", b"S"),
    (b"'", b"T"),
    (b"'", b"L"),
    (b"'L", b"L"),
    (b"'", b"V"),
    (b"'V", b"E"),
    (b"'", b"M"),
    (b"'", b"D"),
    (b"'", b"R"),
    (b"'R", b"E"),
    (b"'", b"s"),
    (b"'", b"t"),
    (b"'", b"l"),
    (b"'l", b"l"),
]
UPPER_CASE_CONTRACTIONS = ("O'Sullivan", "IT'S", "WE'LL", "I'VE", "I'M", "I'D", "THEY'RE", "DON'T", "it's we'll")


@pytest.mark.spec("1.1.pretokenize")
@pytest.mark.parametrize("text", UPPER_CASE_CONTRACTIONS)
def test_upper_case_contractions_are_not_contractions(get_tokenizer, text):
    """The GPT-2 pattern's contractions are lower-case only ('s 't 're 've 'm
    'll 'd): an upper-case 'S, 'T, 'LL, 'VE, 'M, 'D, 'RE is an apostrophe
    pre-token followed by letters, as in tiktoken. Seen through encode with a
    vocabulary whose merges join the apostrophe to the next letter, which only
    a contraction pre-token lets apply."""
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in _APOSTROPHE_MERGES:
        vocab[len(vocab)] = a + b
    tok = get_tokenizer(dict(vocab), list(_APOSTROPHE_MERGES), None)
    oracle = EncodeOracle(vocab, _APOSTROPHE_MERGES, ())
    assert_encodes(
        oracle,
        tok.encode(text),
        text,
        rule="SPEC 1.1: upper-case contractions are not contractions (the pattern is case-sensitive)",
        encode=tok.encode,
    )


@pytest.mark.spec("1.1.pretokenize")
@pin_traps
@given(text=tokenizer_text(specials=(EOT,)) | unicode_text())
@example(text="a  b\n\n c")
@example(text="don't we'll they're I'M")
@example(text="abc<|endoftext|>def 12ab")
def test_encode_tokens_never_cross_pretokens(case: Case, text: str):
    """Every token lies inside one pre-token: text is split on special tokens,
    then by the GPT-2 pattern, and BPE never merges across either boundary."""
    ids = list(case.tokenizer.encode(text))
    boundaries = {0}
    pos = 0
    for segment, special in bpe_replay.split_on_specials(text, [EOT]):
        for piece in [segment] if special else bpe_replay.pretokenize(segment):
            pos += len(piece.encode("utf-8"))
            boundaries.add(pos)
    unknown = [i for i in ids if i not in case.oracle.full_vocab]
    if unknown:
        raise AssertionError(
            f"SPEC 1.3: encode returned ids {unknown[:5]} that are neither in the vocabulary nor special "
            f"tokens\n  input: {text!r} -> {ids}"
        )
    pos = 0
    for k, i in enumerate(ids):
        piece = case.oracle.got_piece(i)
        start, pos = pos, pos + len(piece)
        crossed = [b for b in boundaries if start < b < pos]
        if crossed:
            raise AssertionError(
                f"SPEC 1.1: token {k} (id {i}, {piece!r}) spans the "
                f"pre-token boundary at byte {crossed[0]} "
                f"(pre-tokens: {bpe_replay.pretokenize(text)[:10]})\n  input: {text!r}"
            )
    assert_equal(pos, len(text.encode("utf-8")), rule="SPEC 1.1: tokens cover the text's bytes exactly")
