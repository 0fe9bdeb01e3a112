"""Self-tests of the tokenizer oracles: the slow BPE trainer
(conformance/slow_bpe.py), the tiktoken-backed encode oracle and the GPT-2
file readers (conformance/oracles/tokenizer.py), and the tokenizer strategies."""

import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import slow_bpe
from conformance.oracles.tokenizer import (
    EOT,
    EncodeOracle,
    gpt2_printable_to_byte,
    gpt2_tokenizer_files,
    official_corpus_en_output,
    printable_to_bytes,
)
from conformance.strategies.tokenizer import SMALL_ALPHABET, bpe_corpora, chunkings, tokenizer_text

FIXTURES = Path(os.environ.get("LMSPEC_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures"))
needs_fixtures = pytest.mark.skipif(not (FIXTURES / "corpus.en").is_file(), reason=f"no fixtures at {FIXTURES}")

WORKED_EXAMPLE = "low low low low low lower lower widest widest widest newest newest newest newest newest newest"
WORKED_MERGES = [
    *("s t", "e st", "o w", "l ow", "w est", "n e"),
    *("ne west", "w i", "wi d", "wid est", "low e", "lowe r"),
]


def test_worked_example_of_the_spec():
    """SPEC 1.2 worked example (whitespace pre-tokenization) on the merge core."""
    pretokens = Counter(w.encode() for w in WORKED_EXAMPLE.split())
    merges = slow_bpe.train_from_pretokens(pretokens, len(WORKED_MERGES))
    assert [f"{a.decode()} {b.decode()}" for a, b in merges] == WORKED_MERGES


def test_worked_example_tie_breaks_matter():
    """The worked example's ties: with the smaller pair preferred it differs."""
    pretokens = Counter(w.encode() for w in WORKED_EXAMPLE.split())
    merges = slow_bpe.train_from_pretokens(pretokens, len(WORKED_MERGES), tie="smaller")
    assert [f"{a.decode()} {b.decode()}" for a, b in merges] != WORKED_MERGES


def test_merge_word_is_left_to_right_and_non_overlapping():
    a = b"a"
    assert slow_bpe.merge_word((a, a, a), (a, a)) == (b"aa", a)
    assert slow_bpe.merge_word((a, a, a, a), (a, a)) == (b"aa", b"aa")
    assert slow_bpe.merge_word((a, a, a), (a, a), right_to_left=True) == (a, b"aa")
    assert slow_bpe.count_pairs(Counter({(a, a, a): 2})) == Counter({(a, a): 4})


def test_special_split_is_longest_match():
    double = EOT + EOT
    assert slow_bpe.split_on_specials(EOT * 3, [EOT, double]) == [(double, True), (EOT, True)]
    assert slow_bpe.split_on_specials(EOT * 3, [double, EOT]) == [(double, True), (EOT, True)]
    assert slow_bpe.split_on_specials("", [EOT]) == []


def test_pretokenize_whitespace_lookahead():
    assert slow_bpe.pretokenize("a  b\n\n") == ["a", " ", " b", "\n\n"]
    assert slow_bpe.pretokenize("don't 42x") == ["don", "'t", " 42", "x"]


def test_known_bug_switches_change_the_result():
    text = "ab<|endoftext|>ab ab! ba<|endoftext|>aaa aaa"
    good = slow_bpe.train_bpe(text, 280, [EOT]).merges
    for cause, bug in slow_bpe.KNOWN_BUGS.items():
        assert slow_bpe.train_bpe(text, 280, [EOT], **bug).merges != good, cause


def test_describe_merge_mismatch_names_the_tie_break():
    text = "ab ba ab ba"
    wrong = slow_bpe.train_bpe(text, 260, [], tie="smaller").merges
    message = slow_bpe.describe_merge_mismatch(wrong, text, 260, [])
    assert message is not None and "merge 0" in message and "smaller pair" in message
    assert slow_bpe.describe_merge_mismatch(slow_bpe.train_bpe(text, 260).merges, text, 260) is None


def test_describe_merge_mismatch_names_vocab_size_miscount():
    text = "ab ab ab cd cd ef<|endoftext|>"
    pretokens = slow_bpe.count_pretokens(text, [EOT])
    one_too_many = slow_bpe.train_from_pretokens(pretokens, 4)  # 260 - 256: forgot the special
    message = slow_bpe.describe_merge_mismatch(one_too_many, text, 260, [EOT])
    assert message is not None and "special tokens not counted in vocab_size" in message


@needs_fixtures
def test_slow_trainer_reproduces_official_corpus_en():
    """The oracle itself matches the official trainer on corpus.en (a few s)."""
    ref_vocab, ref_merges = official_corpus_en_output(FIXTURES)
    result = slow_bpe.train_bpe((FIXTURES / "corpus.en").read_text(encoding="utf-8"), 500, [EOT])
    assert result.merges == ref_merges
    assert set(result.vocab.values()) == set(ref_vocab.values())
    assert sorted(result.vocab) == sorted(ref_vocab)


def test_printable_inverse_is_a_bijection():
    table = gpt2_printable_to_byte()
    assert sorted(table.values()) == list(range(256))
    assert printable_to_bytes("ĠtheĊ") == b" the\n"
    assert not any(c.isspace() for c in table)


@needs_fixtures
def test_gpt2_oracle_agrees_with_plain_tiktoken():
    """Our split-then-BPE oracle equals tiktoken running the GPT-2 pattern itself."""
    import tiktoken

    vocab, merges = gpt2_tokenizer_files(FIXTURES)
    assert len(vocab) == 50257 and len(merges) == 50000
    ranks = {b: i for i, b in vocab.items() if i != 50256}
    enc = tiktoken.Encoding(
        "gpt2-offline",
        pat_str=slow_bpe.GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={EOT: 50256},
    )
    oracle = EncodeOracle(vocab, merges, [EOT])
    for name in ("address.txt", "german.txt", "tinystories_sample.txt"):
        text = (FIXTURES / name).read_text(encoding="utf-8")
        assert oracle.encode(text) == enc.encode(text, allowed_special="all"), name
        assert oracle.encode(text, "pairs") == oracle.encode(text), name


@settings(max_examples=30)
@given(corpus=bpe_corpora(), data=st.data())
def test_strategies_yield_valid_values(corpus, data):
    assert corpus.vocab_size >= 256 + len(corpus.special_tokens)
    assert "\r" not in corpus.text and len(corpus.text) >= 2
    text = data.draw(tokenizer_text(specials=tuple(corpus.special_tokens)), label="text")
    text.encode("utf-8")  # no lone surrogates
    chunks = data.draw(chunkings(text), label="chunks")
    assert "".join(chunks) == text
    assert set(corpus.text) <= set(SMALL_ALPHABET) | set("".join(corpus.special_tokens))


@settings(max_examples=30)
@given(corpus=bpe_corpora(), text=tokenizer_text(specials=(EOT,)))
def test_encode_oracle_modes_are_consistent(corpus, text):
    """On trained vocabularies the tiktoken and literal-pair oracles give the
    same byte pieces, whose concatenation is the text."""
    result = slow_bpe.train_bpe(*corpus)
    oracle = EncodeOracle(result.vocab, result.merges, [EOT])
    pieces = oracle.pieces(text)
    assert b"".join(p.encode() if isinstance(p, str) else p for p in pieces) == text.encode()
    assert oracle.mismatch(oracle.encode(text), text) is None
