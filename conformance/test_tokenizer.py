"""SPEC §1.3 encode (and §1.1 pre-tokenization as seen by encode).

Oracle: conformance/oracles/tokenizer.py — special tokens split off longest
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

from conformance import slow_bpe
from conformance.asserts import assert_equal
from conformance.oracles.tokenizer import (
    EOT,
    EncodeOracle,
    assert_encodes,
    gpt2_tokenizer_files,
    sample_training_text,
    slow_trained_vocab,
)
from conformance.strategies.tokenizer import BpeCorpus, bpe_corpora, tokenizer_text, unicode_text

FIXTURE_TEXTS = ("address.txt", "german.txt", "tinystories_sample.txt")
#: Traps pinned on every Unicode property test.
TRAPS = ("", " ", "  \n\n", "a\n\nb", "don't", "😀", EOT, "a1b22 c333d", "x  y", "\t\n \n")


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
    ``vocab``/``merges``, and the oracle from the originals."""
    key = (id(get_tokenizer), name, tuple(specials) if specials is not None else None)
    if key not in _CASES:
        tok = get_tokenizer(dict(vocab), list(merges), list(specials) if specials is not None else None)
        _CASES[key] = Case(name, tok, EncodeOracle(vocab, merges, specials or ()))
    return _CASES[key]


def gpt2_case(get_tokenizer, fixtures_dir: Path, specials: Sequence[str] | None = (EOT,)) -> Case:
    vocab, merges = gpt2_tokenizer_files(fixtures_dir)
    return make_case(get_tokenizer, "gpt2", vocab, merges, specials)


def slow_case(get_tokenizer, specials: Sequence[str] | None = (EOT,)) -> Case:
    vocab, merges = slow_trained_vocab()
    return make_case(get_tokenizer, "slow", vocab, merges, specials)


_OWN: dict[int, tuple[dict, list]] = {}


def own_case(
    get_tokenizer,
    run_train_bpe,
    tmp_path_factory: pytest.TempPathFactory,
    specials: Sequence[str] | None = (EOT,),
) -> Case:
    """The implementation's own trainer output (same built-in text, 200 merges).
    Skips when that output is not a usable vocabulary (the 1.2 tests say why),
    so a trainer bug is not reported against encode."""
    if id(run_train_bpe) not in _OWN:
        path = tmp_path_factory.mktemp("own_training") / "sample_training_text.txt"
        path.write_bytes(sample_training_text().encode("utf-8"))
        vocab, merges = run_train_bpe(input_path=path, vocab_size=256 + 1 + 200, special_tokens=[EOT])
        _OWN[id(run_train_bpe)] = (dict(vocab), list(merges))
    vocab, merges = _OWN[id(run_train_bpe)]
    values = set(vocab.values())
    unusable = [m for m in merges if not {m[0], m[1], m[0] + m[1]} <= values]
    if unusable or not all(bytes([b]) in values for b in range(256)):
        pytest.skip(f"own trainer's vocab lacks bytes or merge parts (e.g. {unusable[:1]}): see 1.2")
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
def test_encode_matches_tiktoken_on_fixture_texts(
    request, get_tokenizer, fixtures_dir, tmp_path_factory, source, name, specials
):
    """encode(text) equals tiktoken built from the same merges (ranks = merge
    order), for GPT-2's files and for the implementation's own trained merges."""
    if source == "gpt2":
        c = gpt2_case(get_tokenizer, fixtures_dir, specials)
    else:
        train = request.getfixturevalue("run_train_bpe")
        c = own_case(get_tokenizer, train, tmp_path_factory, specials)
    text = read_fixture_text(fixtures_dir, name)
    assert_encodes(
        c.oracle,
        c.tokenizer.encode(text),
        text,
        rule=f"SPEC 1.3: encode({name}) with {c.name} merges",
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
    )


@pytest.mark.spec("1.3.encode")
@given(corpus=bpe_corpora(), text=tokenizer_text(specials=("<|endoftext|>", "<|pad|>")))
@example(corpus=BpeCorpus("aaa aaaa aa", 262, []), text="aaaaaaa aaa")  # overlapping merges
@example(corpus=BpeCorpus("ab abab bab", 262, []), text="ababab bab")
def test_encode_matches_rank_bpe_on_small_vocabularies(get_tokenizer, corpus: BpeCorpus, text: str):
    """On vocabularies trained (by the slow oracle) from tiny corpora, where
    ties and repeated characters are common, encode applies the earliest
    applicable merge first until none applies."""
    trained = slow_bpe.train_bpe(*corpus)
    tok = get_tokenizer(dict(trained.vocab), list(trained.merges), list(corpus.special_tokens))
    oracle = EncodeOracle(trained.vocab, trained.merges, corpus.special_tokens)
    assert_encodes(oracle, tok.encode(text), text, rule=f"SPEC 1.3: encode with merges {trained.merges[:8]}...")


@pytest.mark.spec("1.3.encode")
def test_encode_empty_text_is_empty(get_tokenizer):
    """encode("") == []."""
    assert_equal(
        list(slow_case(get_tokenizer).tokenizer.encode("")),
        [],
        rule="SPEC 1.3: encode of empty text",
    )


# --- pre-tokenization, seen through encode ---------------------------------------------
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
    for segment, special in slow_bpe.split_on_specials(text, [EOT]):
        for piece in [segment] if special else slow_bpe.pretokenize(segment):
            pos += len(piece.encode("utf-8"))
            boundaries.add(pos)
    pos = 0
    for k, i in enumerate(ids):
        start, pos = pos, pos + len(case.oracle.piece_of(i))
        crossed = [b for b in boundaries if start < b < pos]
        if crossed:
            raise AssertionError(
                f"SPEC 1.1: token {k} (id {i}, {case.oracle.piece_of(i)!r}) spans the "
                f"pre-token boundary at byte {crossed[0]} "
                f"(pre-tokens: {slow_bpe.pretokenize(text)[:10]})\n  input: {text!r}"
            )
    assert_equal(pos, len(text.encode("utf-8")), rule="SPEC 1.1: tokens cover the text's bytes exactly")
