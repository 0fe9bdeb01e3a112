"""Self-tests of the tokenizer oracles: the slow BPE trainer
(conformance/cs336/oracles/bpe_replay.py), the tiktoken-backed encode oracle and the GPT-2
file readers (conformance/cs336/oracles/tokenizer.py), and the tokenizer strategies."""

import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmspec.conformance.cs336.oracles import bpe_replay
from lmspec.conformance.cs336.oracles.tokenizer import (
    EOT,
    EncodeOracle,
    encode_iterable_memory_hint,
    gpt2_printable_to_byte,
    gpt2_tokenizer_files,
    memory_stream_lines,
    official_corpus_en_output,
    printable_to_bytes,
)
from lmspec.conformance.cs336.strategies.tokenizer import (
    SMALL_ALPHABET,
    bpe_corpora,
    chunkings,
    file_lines,
    lined_texts,
    tokenizer_text,
)

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
    merges = bpe_replay.train_from_pretokens(pretokens, len(WORKED_MERGES))
    assert [f"{a.decode()} {b.decode()}" for a, b in merges] == WORKED_MERGES


def test_worked_example_tie_breaks_matter():
    """The worked example's ties: with the smaller pair preferred it differs."""
    pretokens = Counter(w.encode() for w in WORKED_EXAMPLE.split())
    merges = bpe_replay.train_from_pretokens(pretokens, len(WORKED_MERGES), tie="smaller")
    assert [f"{a.decode()} {b.decode()}" for a, b in merges] != WORKED_MERGES


def test_merge_word_is_left_to_right_and_non_overlapping():
    a = b"a"
    assert bpe_replay.merge_word((a, a, a), (a, a)) == (b"aa", a)
    assert bpe_replay.merge_word((a, a, a, a), (a, a)) == (b"aa", b"aa")
    assert bpe_replay.merge_word((a, a, a), (a, a), right_to_left=True) == (a, b"aa")
    assert bpe_replay.count_pairs(Counter({(a, a, a): 2})) == Counter({(a, a): 4})


def test_special_split_is_longest_match():
    double = EOT + EOT
    assert bpe_replay.split_on_specials(EOT * 3, [EOT, double]) == [(double, True), (EOT, True)]
    assert bpe_replay.split_on_specials(EOT * 3, [double, EOT]) == [(double, True), (EOT, True)]
    assert bpe_replay.split_on_specials("", [EOT]) == []


def test_pretokenize_whitespace_lookahead():
    assert bpe_replay.pretokenize("a  b\n\n") == ["a", " ", " b", "\n\n"]
    assert bpe_replay.pretokenize("don't 42x") == ["don", "'t", " 42", "x"]
    # Upper-case contractions are not contractions; the IGNORECASE bug makes them so.
    assert bpe_replay.pretokenize("O'Sullivan") == ["O", "'", "Sullivan"]
    assert bpe_replay.pretokenize("O'Sullivan", ignorecase=True) == ["O", "'S", "ullivan"]


def test_known_bug_switches_change_the_result():
    text = "ab<|endoftext|>ab ab! ba<|endoftext|>aaa aaa IT'S IT'S"
    good = bpe_replay.train_bpe(text, 280, [EOT]).merges
    for cause, bug in bpe_replay.KNOWN_BUGS.items():
        assert bpe_replay.train_bpe(text, 280, [EOT], **bug).merges != good, cause


def test_describe_merge_mismatch_names_the_tie_break():
    text = "ab ba ab ba"
    wrong = bpe_replay.train_bpe(text, 260, [], tie="smaller").merges
    message = bpe_replay.describe_merge_mismatch(wrong, text, 260, [])
    assert message is not None and "merge 0" in message and "smaller pair" in message
    assert bpe_replay.describe_merge_mismatch(bpe_replay.train_bpe(text, 260).merges, text, 260) is None


def test_describe_merge_mismatch_names_vocab_size_miscount():
    text = "ab ab ab cd cd ef<|endoftext|>"
    pretokens = bpe_replay.count_pretokens(text, [EOT])
    one_too_many = bpe_replay.train_from_pretokens(pretokens, 4)  # 260 - 256: forgot the special
    message = bpe_replay.describe_merge_mismatch(one_too_many, text, 260, [EOT])
    assert message is not None and "special tokens not counted in vocab_size" in message


def test_describe_merge_mismatch_vocab_size_hints_are_computed():
    """The vocab_size hints appear only when the merges are exactly what that
    miscount gives: a correct count that trains on past the last pair is
    told it merged a pair that does not occur, not that it miscounted."""
    text = "ab ab ab cd cd ef<|endoftext|>"
    good = bpe_replay.train_bpe(text, 260, [EOT]).merges
    too_few = bpe_replay.describe_merge_mismatch(good[:2], text, 260, [EOT])
    assert too_few is not None and "subtracted twice" in too_few and "off by one" in too_few  # k = 1: either
    short = "ab ab<|endoftext|>"  # one merge possible: training stops early
    stopped = bpe_replay.train_bpe(short, 262, [EOT]).merges
    garbage = [*stopped, (b"b", b"a")]  # one more, of a pair that occurs nowhere
    message = bpe_replay.describe_merge_mismatch(garbage, short, 262, [EOT])
    assert message is not None and "occurs nowhere" in message and "not counted in vocab_size" not in message
    early = bpe_replay.describe_merge_mismatch(good[:1], text, 261, [EOT])
    assert early is not None and "stopped after 1 merges" in early and "vocab_size (" not in early


def test_memory_hint_names_what_memory_scales_with():
    """encode_iterable_memory_hint tells the causes apart from measurements
    (KiB as a function of stream length and kind), never from the size alone."""

    def hint(growth):
        return encode_iterable_memory_hint(
            growth, stream_chars=2_000_000, observed_kib=growth(2_000_000, True), bound_kib=1024
        )

    def kept(chars, fresh):  # the stream or its ids kept
        return 4.5 * chars / 2000

    def unbounded(chars, fresh):  # a cache of every pre-token
        return 6.5 * chars / 2000 if fresh else 30

    def lru(chars, fresh):  # a bounded cache, full before half the stream
        return 4000 if fresh else 30

    def buffer(chars, fresh):  # a big fixed buffer
        return 6500

    assert "proportional to the stream is kept" in hint(kept)
    assert "keeps every distinct pre-token" in hint(unbounded)
    assert "bounded pre-token cache" in hint(lru) and "keeps every" not in hint(lru)
    assert "fixed-size buffer" in hint(buffer)


def _with_reuse(growth):
    """Measured growth when memory freed by earlier runs is reused: each run's
    peak rises only by what it needs beyond the most any run before it took."""
    most = [0.0]

    def measured(chars, fresh):
        need = growth(chars, fresh)
        seen, most[0] = most[0], max(most[0], need)
        return need - seen

    return measured


def test_memory_hint_sees_what_is_kept_through_reused_memory():
    """A run after the first reuses the memory the first freed (its measured
    growth is smaller than what it needs): the stream kept is still told
    from a pre-token cache (a kept stream was once told "a pre-token cache")."""

    def hint(growth):
        measured = _with_reuse(growth)
        return encode_iterable_memory_hint(
            measured, stream_chars=2_000_000, observed_kib=measured(2_000_000, True), bound_kib=1024
        )

    def kept(chars, fresh):  # every chunk kept: 2.8 MB for 2 MB of lines, fresh or repeating
        return 2.8 * chars / 2000

    def unbounded(chars, fresh):
        return 5 * chars / 2000 if fresh else 30

    assert "proportional to the stream is kept" in hint(kept)
    assert "keeps every distinct pre-token" in hint(unbounded)


def test_memory_stream_lines_sizes_and_kinds():
    fresh = list(memory_stream_lines(20_000))
    repeated = list(memory_stream_lines(20_000, fresh=False))
    assert 20_000 <= sum(map(len, fresh)) < 21_000 and 20_000 <= sum(map(len, repeated)) < 21_000
    assert len(set(line.split(" ", 1)[0] for line in fresh)) == len(fresh)  # a new number each line
    assert len(set(repeated)) < len(repeated) / 2


def test_file_lines_cut_like_a_file_handle(tmp_path):
    text = "a\n\n  b \n\n\nc<|endoftext|>\n \n"
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8", newline="")
    with open(path, encoding="utf-8") as f:
        assert file_lines(text) == list(f)
    assert file_lines("") == [] and file_lines("x") == ["x"]


@settings(max_examples=30)
@given(lt=lined_texts(specials=(EOT,)))
def test_lined_texts_are_their_lines(lt):
    assert "".join(lt.lines) == lt.text and "\r" not in lt.text
    assert all(line.endswith("\n") for line in lt.lines[:-1]) and all(lt.lines)


def test_oracle_adopts_the_implementations_id_for_an_added_special():
    """The id of a special token absent from the vocab is the implementation's
    choice: the oracle takes it when it is one unused id, not otherwise."""
    vocab = {i: bytes([i]) for i in range(256)}
    oracle = EncodeOracle(vocab, [], ["<|a|>", "<|b|>"])
    assert oracle.special_ids == {"<|a|>": 256, "<|b|>": 257}
    oracle.adopt_special_ids({"<|a|>": [900], "<|b|>": [7]}.__getitem__)  # 7 is the byte b"\x07"
    assert oracle.special_ids["<|a|>"] == 900 and oracle.special_ids["<|b|>"] not in (7, 900)
    assert oracle.encode("x<|a|>") == [ord("x"), 900]


@needs_fixtures
def test_slow_trainer_reproduces_official_corpus_en():
    """The oracle itself matches the official trainer on corpus.en (a few s)."""
    ref_vocab, ref_merges = official_corpus_en_output(FIXTURES)
    result = bpe_replay.train_bpe((FIXTURES / "corpus.en").read_text(encoding="utf-8"), 500, [EOT])
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
        pat_str=bpe_replay.GPT2_PATTERN,
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
    result = bpe_replay.train_bpe(*corpus)
    oracle = EncodeOracle(result.vocab, result.merges, [EOT])
    pieces = oracle.pieces(text)
    assert b"".join(p.encode() if isinstance(p, str) else p for p in pieces) == text.encode()
    assert oracle.mismatch(oracle.encode(text), text) is None
