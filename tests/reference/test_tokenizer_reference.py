"""Reference-internal tests of reference.tokenizer (SPEC §1).

Oracles: the official CS336 training output and the GPT-2 files in
shared/fixtures (skipped with a reason when absent), tiktoken built offline
from those files, and the streaming / chunking invariants stated in SPEC §1.3.
Error messages are asserted verbatim-ish, as the style guide asks.
"""

import gc
import itertools
import json
import os
import pydoc_data.topics
import statistics
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st

from lmspec.reference.adapter.tokenizer import get_tokenizer, run_train_bpe
from lmspec.reference.tokenizer import (
    GPT2_PATTERN,
    Tokenizer,
    count_file_pretokens,
    count_pretokens,
    encode_file,
    gpt2_bytes_to_unicode,
    printable_to_bytes,
    save_vocab_merges,
    train_bpe,
    train_bpe_from_counts,
)
from lmspec.reference.tokenizer.counting import find_chunk_boundaries
from lmspec.reference.tokenizer.pretokenize import GPT2_REGEX, split_final_pretokens

EOT = "<|endoftext|>"
SPECIALS = [EOT, EOT + EOT, "<|x|>"]
OFFICIAL_BOUND_S = 1.5  # CS336 speed test on corpus.en


def _corpus_text() -> str:
    """Deterministic English-ish training text every Python ships (DESIGN: data)."""
    docs = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)[:12]]
    return EOT.join(docs)


@pytest.fixture(scope="module")
def small_tokenizer() -> Tokenizer:
    """BPE trained on pydoc topics (vocab 400) with overlapping special tokens."""
    vocab, merges = train_bpe_from_counts(count_pretokens(_corpus_text(), [EOT]), 400, SPECIALS)
    return Tokenizer(vocab, merges, SPECIALS)


@pytest.fixture(scope="module")
def gpt2(fixtures_dir: Path) -> Tokenizer:
    return Tokenizer.from_files(fixtures_dir / "gpt2_vocab.json", fixtures_dir / "gpt2_merges.txt", [EOT])


@pytest.fixture(scope="module")
def tiktoken_gpt2(gpt2: Tokenizer):
    """tiktoken built offline from the same GPT-2 files (ranks = ids, as in GPT-2)."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {token: i for i, token in gpt2.vocab.items() if i != 50256}
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={EOT: 50256},
    )


def _read_official(fixtures_dir: Path) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    lines = (fixtures_dir / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    merges = [tuple(printable_to_bytes(part) for part in line.split(" ")) for line in lines if line]
    raw = json.loads((fixtures_dir / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    return {i: printable_to_bytes(token) for token, i in raw.items()}, merges


# --- training -------------------------------------------------------------------
@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_reproduces_official_corpus_en(fixtures_dir: Path) -> None:
    """train_bpe(corpus.en, 500, [EOT]): the official merges exactly, same vocab sets, fast."""
    official_vocab, official_merges = _read_official(fixtures_dir)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        vocab, merges = train_bpe(fixtures_dir / "corpus.en", 500, [EOT])
        times.append(time.perf_counter() - start)
        if times[-1] < OFFICIAL_BOUND_S / 3:
            break
    print(f"train_bpe(corpus.en, 500): {statistics.median(times):.3f} s (runs: {times})")
    assert merges == official_merges
    assert set(vocab) == set(official_vocab)
    assert set(vocab.values()) == set(official_vocab.values())
    assert min(times) < OFFICIAL_BOUND_S


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_worked_example_from_spec() -> None:
    """SPEC §1.2 worked example (whitespace pre-tokens): the listed merges, ties to the greater."""
    corpus = "low low low low low lower lower widest widest widest " + "newest " * 6
    vocab, merges = train_bpe_from_counts(Counter(corpus.split()), 1000, [EOT])
    expected = "s t|e st|o w|l ow|w est|n e|ne west|w i|wi d|wid est|low e|lowe r"
    assert [f"{a.decode()} {b.decode()}" for a, b in merges] == expected.split("|")
    assert vocab[256] == EOT.encode() and vocab[ord("a")] == b"a"  # ids: bytes, specials, merges
    assert sorted(vocab) == list(range(256 + 1 + 12))


@pytest.mark.spec("1.2.train_bpe")
@given(st.dictionaries(st.text("abé ", min_size=1, max_size=6), st.integers(1, 5), max_size=8))
def test_train_bpe_from_counts_accepts_str_bytes_and_tuple_keys(counts: dict[str, int]) -> None:
    """The three key forms of train_bpe_from_counts give the same merges."""
    as_bytes = Counter()
    as_tuples = Counter()
    for word, n in counts.items():
        as_bytes[word.encode()] += n
        as_tuples[tuple(bytes([b]) for b in word.encode())] += n
    results = [train_bpe_from_counts(c, 300, []) for c in (counts, as_bytes, as_tuples)]
    assert results[0] == results[1] == results[2]


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_parallel_counts_equal_single_process(tmp_path: Path) -> None:
    """Counting chunk by chunk in workers gives the whole file's counts."""
    path = tmp_path / "corpus.txt"
    path.write_text(_corpus_text() * 2, encoding="utf-8")
    single = count_file_pretokens(path, [EOT], num_workers=1)
    parallel = count_file_pretokens(path, [EOT], num_workers=2, min_parallel_bytes=0)
    assert parallel == single
    no_specials = count_file_pretokens(path, [], num_workers=2, min_parallel_bytes=0)
    assert no_specials == count_pretokens(path.read_text(encoding="utf-8"), [])


@pytest.mark.spec("1.2.train_bpe")
@pytest.mark.parametrize(
    "specials",
    [[EOT], [], ["<e>", "<e><e>"]],
    ids=["special cuts", "newline cuts", "overlapping specials"],
)
def test_find_chunk_boundaries_cut_only_where_counts_add_up(tmp_path: Path, specials: list[str]) -> None:
    """Every chunk boundary splits the file into pieces whose counts add up to the whole."""
    text = "\n".join(f"line {i} <e><e> x{EOT}y\nz  \n\n" for i in range(3000))
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode())
    bounds = find_chunk_boundaries(path, 16, specials)
    data = path.read_bytes()
    assert bounds[0] == 0 and bounds[-1] == len(data) and bounds == sorted(set(bounds))
    pieces = Counter()
    for a, b in itertools.pairwise(bounds):
        pieces += count_pretokens(data[a:b].decode(), specials)
    assert pieces == count_pretokens(text, specials)
    if specials == [EOT]:  # a special's start or a newline cut
        assert len(bounds) > 2
        assert all(data.startswith(EOT.encode(), b) or data[b - 1 : b] == b"\n" for b in bounds[1:-1])


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_errors_name_the_problem(tmp_path: Path) -> None:
    """vocab_size too small, bad UTF-8, missing file: clear errors."""
    good = tmp_path / "good.txt"
    good.write_text("hello world", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab_size \(257\) must be at least 258: 256 byte tokens \+ 2"):
        train_bpe(good, 257, ["<a>", "<b>"])
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xc3\xa9 ok " * 10 + b"\xff rest")
    with pytest.raises(ValueError, match=r"bad\.txt' is not valid UTF-8: first bad byte 0xff at byte offset 90"):
        train_bpe(bad, 300, [])
    big_bad = tmp_path / "big_bad.txt"
    big_bad.write_bytes(("word\n" * 50_000).encode() + b"x\x80y\n" + b"more\n" * 1000)
    with pytest.raises(ValueError, match=r"first bad byte 0x80 at byte offset 250001"):
        count_file_pretokens(big_bad, [], num_workers=2, min_parallel_bytes=0)
    with pytest.raises(FileNotFoundError, match=r"train_bpe: input file '.*nope\.txt' does not exist"):
        run_train_bpe(tmp_path / "nope.txt", 300, [])
    with pytest.raises(TypeError, match="special_tokens must be a list of strings"):
        train_bpe(good, 300, EOT)
    with pytest.raises(ValueError, match=r"special_tokens\[1\] is the empty string"):
        train_bpe(good, 300, [EOT, ""])


# --- encoding against tiktoken -----------------------------------------------------
@pytest.mark.spec("1.3.encode")
@pytest.mark.parametrize("name", ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en"])
def test_encode_equals_tiktoken_gpt2(name: str, fixtures_dir: Path, gpt2: Tokenizer, tiktoken_gpt2) -> None:
    """encode(text) equals tiktoken on GPT-2, with and without the special token; round trip."""
    text = (fixtures_dir / name).read_text(encoding="utf-8")
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert gpt2.decode(ids) == text
    plain = get_tokenizer(gpt2.vocab, gpt2.merges)
    assert plain.encode(text) == tiktoken_gpt2.encode(text, disallowed_special=())
    chunks = [text[i : i + 97] for i in range(0, len(text), 97)]
    assert list(gpt2.encode_iterable(chunks, flush_chars=200)) == ids


@pytest.mark.spec("1.3.encode")
def test_encode_long_pretokens_use_the_same_bpe(gpt2: Tokenizer, tiktoken_gpt2) -> None:
    """Pre-tokens longer than the quadratic-loop limit (heap path) still equal tiktoken."""
    for text in ["a" * 1001, " " * 333 + "x", "ab" * 300, "\u00e9" * 200, "-=" * 150 + "\n" * 90]:
        assert gpt2.encode(text) == tiktoken_gpt2.encode(text), repr(text[:20])


@pytest.mark.spec("1.3.encode")
@given(st.lists(st.integers(0, 5), min_size=2, max_size=160))
def test_heap_merge_equals_quadratic_merge(small_tokenizer: Tokenizer, letters: list[int]) -> None:
    """_merge_long (heap) gives the same tokens as the leftmost-lowest-rank loop."""
    text = "".join("aeinst"[i] for i in letters)
    ids = [small_tokenizer._byte_ids[b] for b in text.encode()]
    expected = list(ids)
    while len(expected) > 1:
        ranks = [small_tokenizer._pair_ranks.get(p, 1 << 62) for p in itertools.pairwise(expected)]
        if min(ranks) == 1 << 62:
            break
        i = ranks.index(min(ranks))
        expected[i : i + 2] = [small_tokenizer._merged_ids[ranks[i]]]
    assert small_tokenizer._merge_long(ids) == expected


# --- streaming ---------------------------------------------------------------------
PIECES = ["a", "bc", "é", "中", " ", "  ", "\n", "\t", "'", "'ll", "'s", "l", "1", "23", "!",
          "?!", EOT, "<|", "endoftext", "|>", "<", "<|x|>", "\r\n", "\u00a0", " the",
          "\u0301"]  # fmt: skip


@st.composite
def chunked_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=40), label="pieces"))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12), label="cuts"))
    return text, [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]


@pytest.mark.spec("1.3.encode_iterable")
@given(chunked_texts(), st.sampled_from([1, 3, 64]))
@example((EOT + EOT + "x", [EOT, EOT, "x"]), 1)
@example(("it'll  \n b", ["it'l", "l  ", "\n", " b"]), 1)
@example(("a \nb", ["a \n", "b"]), 1)
def test_encode_iterable_equals_encode_for_any_chunking(
    small_tokenizer: Tokenizer, case: tuple[str, list[str]], flush_chars: int
) -> None:
    """encode_iterable(chunks) == encode("".join(chunks)), cuts anywhere, overlapping specials."""
    text, chunks = case
    note(f"chunks={chunks!r}")
    streamed = list(small_tokenizer.encode_iterable(iter(chunks), flush_chars=flush_chars))
    assert streamed == small_tokenizer.encode(text)
    assert small_tokenizer.decode(streamed) == text


@pytest.mark.spec("1.3.encode_iterable")
@given(st.text(st.sampled_from(list("ab 'l\n\t1!é\u00a0")), max_size=30), st.data())
def test_split_final_pretokens_are_stable_under_any_continuation(prefix: str, data: st.DataObject) -> None:
    """Pre-tokens split_final_pretokens calls final start the pre-tokens of prefix + anything."""
    final, consumed = split_final_pretokens(prefix)
    assert "".join(final) == prefix[:consumed]
    suffix = data.draw(st.text(st.sampled_from(list("ab 'ls\n!1")), max_size=6), label="suffix")
    assert GPT2_REGEX.findall(prefix + suffix)[: len(final)] == final


@pytest.mark.spec("1.3.encode_iterable")
def test_encode_iterable_is_lazy(small_tokenizer: Tokenizer) -> None:
    """Ids come out before the stream ends (memory bounded by the buffer, not the stream)."""

    def endless():
        while True:
            yield "the quick brown fox jumps over the lazy dog\n"

    stream = small_tokenizer.encode_iterable(endless(), flush_chars=1000)
    assert len(list(itertools.islice(stream, 5000))) == 5000


@pytest.mark.spec("1.3.encode_iterable")
@given(chunked_texts(), st.sampled_from([1, 2, 5]))
def test_tiny_pretoken_caches_change_nothing(
    small_tokenizer: Tokenizer, case: tuple[str, list[str]], cache_entries: int
) -> None:
    """A cache turning over every few pre-tokens gives the same ids as encode."""
    text, chunks = case
    streamed = small_tokenizer.encode_iterable(iter(chunks), flush_chars=7, cache_entries=cache_entries)
    assert list(streamed) == small_tokenizer.encode(text)


def test_pretoken_cache_is_bounded_and_keeps_frequent_pretokens(small_tokenizer: Tokenizer) -> None:
    """Two generations of at most ``entries``: distinct pre-tokens never grow it past 2x,
    and a pre-token met in every generation keeps its first entry (never re-encoded)."""
    tok = Tokenizer(small_tokenizer.vocab, small_tokenizer.merges)
    tok._cache = cache = type(tok._cache)(4)
    tok.encode(" the")
    first = cache.young[" the"]
    text = "".join(f" w{i} the" for i in range(40))  # " w", 40 numbers, " the"
    assert tok.decode(tok.encode(text)) == text
    assert len(cache.young) <= 4 and len(cache.old) <= 4
    latest = cache.young.get(" the", cache.old.get(" the"))
    assert latest is first, "' the' was evicted and BPE-encoded again"


def test_pretoken_cache_entries_leave_the_cyclic_gc(small_tokenizer: Tokenizer) -> None:
    """Cached encodings are not walked by every GC pass (lists would be: 12% of
    encode's time with the type checks' objects loaded, BENCHMARKS.md)."""
    tok = Tokenizer(small_tokenizer.vocab, small_tokenizer.merges)
    tok.encode("the cat sat on the mat, 1234 times\n" * 3)
    gc.collect()
    entries = [*tok._cache.young.values(), *tok._cache.old.values()]
    assert entries and not any(gc.is_tracked(ids) for ids in entries)


def test_encode_iterable_rejects_bad_buffer_and_cache_sizes(small_tokenizer: Tokenizer) -> None:
    with pytest.raises(ValueError, match=r"flush_chars \(0\) must be at least 1"):
        list(small_tokenizer.encode_iterable(["a"], flush_chars=0))
    with pytest.raises(ValueError, match=r"cache_entries \(0\) must be at least 1, or None"):
        list(small_tokenizer.encode_iterable(["a"], cache_entries=0))


# --- special tokens, decode, files ---------------------------------------------------
@pytest.mark.spec("1.3.special_tokens")
def test_special_tokens_longest_match_and_added_ids(small_tokenizer: Tokenizer) -> None:
    """Overlapping specials: longest wins; missing ones get the next free ids; no list -> text."""
    ids = small_tokenizer.special_token_ids
    text = f"a{EOT}{EOT}{EOT}b"
    assert small_tokenizer.encode(text).count(ids[EOT + EOT]) == 1
    assert small_tokenizer.encode(text).count(ids[EOT]) == 1
    vocab = {i: bytes([i]) for i in range(256)}
    tok = Tokenizer(vocab, [], ["<new>", "<also>"])
    assert tok.special_token_ids == {"<new>": 256, "<also>": 257} and len(vocab) == 256
    assert Tokenizer(vocab, []).encode("<new>") == list(b"<new>")


@pytest.mark.spec("1.3.decode")
def test_decode_replaces_malformed_bytes_and_rejects_unknown_ids(
    small_tokenizer: Tokenizer,
) -> None:
    """decode: malformed UTF-8 -> U+FFFD; unknown id -> ValueError naming id and position."""
    assert small_tokenizer.decode([0xE2, ord("a")]) == "\ufffda"
    assert small_tokenizer.decode(np.array([104, 105])) == "hi"
    with pytest.raises(
        ValueError,
        match=r"decode: unknown token id 99999 at position 1 \(the vocabulary has 400 ids",
    ):
        small_tokenizer.decode([104, 99999])
    with pytest.raises(ValueError, match=r"decode: unknown token id -1 at position 0"):
        small_tokenizer.decode([-1])


def test_gpt2_bytes_to_unicode_is_printable_bijection() -> None:
    """GPT-2 alphabet: 256 distinct non-space printable characters; space -> Ġ, newline -> Ċ."""
    table = gpt2_bytes_to_unicode()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in table.values())
    assert (table[ord(" ")], table[ord("\n")], table[ord("a")]) == ("Ġ", "Ċ", "a")


def test_save_and_from_files_round_trip(tmp_path: Path, small_tokenizer: Tokenizer) -> None:
    """save -> from_files gives the same vocab, merges and encodings; the format is GPT-2's."""
    small_tokenizer.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    loaded = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", SPECIALS)
    assert loaded.vocab == small_tokenizer.vocab and loaded.merges == small_tokenizer.merges
    text = _corpus_text()[:3000]
    assert loaded.encode(text) == small_tokenizer.encode(text)
    assert json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))["Ġ"] == 32
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + (tmp_path / "merges.txt").read_text("utf-8"), "utf-8")
    assert Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt").merges == loaded.merges


def test_gpt2_files_save_back_identically(tmp_path: Path, fixtures_dir: Path, gpt2: Tokenizer) -> None:
    """Loading and saving the released GPT-2 files reproduces them (merges byte for byte)."""
    save_vocab_merges(gpt2.vocab, gpt2.merges, tmp_path / "v.json", tmp_path / "m.txt")
    original = (fixtures_dir / "gpt2_merges.txt").read_text(encoding="utf-8")
    assert (tmp_path / "m.txt").read_text(encoding="utf-8") == original.rstrip("\n") + "\n"
    saved = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    assert saved == json.loads((fixtures_dir / "gpt2_vocab.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("vocab_text", "merges_text", "message"),
    [
        ('{\n  "a": 0,\n  "b": x\n}', "", r"vocab\.json' line 3: not valid JSON"),
        (
            '{\n  "a": 0,\n  "b": "1"\n}',
            "",
            r"vocab\.json' line 3: id of token 'b' must be a non-negative integer",
        ),
        (
            '{\n  "a": 0,\n  "b c": 1\n}',
            "",
            r"line 3: 'b c': character ' ' \(U\+0020\) at index 1 is not in",
        ),
        ('{"a": 0,\n "b": 0}', "", r"line 2: id 0 is used twice \(token 'b'\)"),
        (
            '{"a": 0, "b": 1}',
            "a b\na b c\n",
            r"merges\.txt' line 2: expected two tokens separated by one space",
        ),
        (
            '{"a": 0, "b": 1}',
            "a b\n",
            r"merges\[0\] = \(b'a', b'b'\): b'ab' is not in the vocabulary",
        ),
    ],
    ids=[
        "bad json",
        "string id",
        "space in token",
        "duplicate id",
        "three-part merge",
        "merge result missing",
    ],
)
def test_from_files_errors_name_file_and_line(tmp_path: Path, vocab_text: str, merges_text: str, message: str) -> None:
    """Wrong-format files -> ValueError naming the file and the line."""
    (tmp_path / "vocab.json").write_text(vocab_text, encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges_text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


def test_encode_file_writes_memmappable_npy(tmp_path: Path, small_tokenizer: Tokenizer) -> None:
    """encode_file streams to a uint16 .npy equal to encode(text); bad UTF-8 names its offset."""
    text = _corpus_text()
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    stats = encode_file(small_tokenizer, source, tmp_path / "out.npy", progress=False)
    array = np.load(tmp_path / "out.npy", mmap_mode="r")
    assert array.dtype == np.uint16 and array.shape == (stats.tokens,)
    assert array.tolist() == small_tokenizer.encode(text)
    assert stats.bytes_read == os.path.getsize(source) and stats.seconds > 0
    source.write_bytes(b"ok " * 1000 + b"\xc3(")
    with pytest.raises(ValueError, match=r"not valid UTF-8: first bad byte at byte offset 3000"):
        encode_file(small_tokenizer, source, tmp_path / "bad.npy", progress=False)
