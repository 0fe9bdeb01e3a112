"""SPEC §1.3 encode_iterable: lazily yields exactly encode("".join(chunks))
when the chunks are the lines of a text (what a file handle gives: blank
lines, whitespace runs and special tokens included); STRICT: for any chunking
(mid-word, mid-whitespace-run, mid-special-token, empty chunks); SHOULD: memory
bounded independently of the stream.

One bug, one item: the rule is relative to encode, so every test compares
with the implementation's OWN encode of the same text (never with the
oracle: a wrong id from encode is the encode items' failure, not this one's),
and an input on which that encode raises (a special token absent from the
vocabulary that encode cannot look up, say) is avoided: Hypothesis tests drop
it, the others are skipped with the reason (:func:`own_encode`)."""

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import example, given, note, reject, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from lmspec.conformance import hints
from lmspec.conformance.asserts import assert_equal
from lmspec.conformance.cs336.oracles.bpe_replay import pretokenize, split_on_specials
from lmspec.conformance.cs336.oracles.tokenizer import (
    EOT,
    encode_iterable_memory_hint,
    memory_stream_lines,
    sample_training_text,
)
from lmspec.conformance.cs336.strategies.tokenizer import ChunkedText, LinedText, chunked_texts, file_lines, lined_texts
from lmspec.conformance.cs336.test_tokenizer import FIXTURE_TEXTS, gpt2_case, slow_case
from lmspec.conformance.judge.faults import SubmissionError

DOUBLE = EOT + EOT
#: Laziness: the first ids must come before this many characters of lines are
#: pulled from an endless stream. 16 MB, three times the official 5 MB memory
#: stream, admits any read-ahead buffer a lazy implementation might use, and an
#: implementation that joins or lists its input hits it in about a second.
LAZY_PULL_LIMIT_CHARS = 16_000_000
#: Memory (SHOULD): encoding a STREAM_BYTES stream may raise the process's peak
#: resident memory by at most PEAK_GROWTH_BOUND_KIB. The classic check is 5 MB
#: under a 1 MB allowance; 2 MB keeps the test to a second or two while the
#: gap stays wide: buffering the stream costs its size in str plus its list of
#: lines, about 20 MB measured for 2 MB, and keeping its ids costs ~8 bytes
#: each. Every line of the stream carries a new number, so its distinct
#: pre-tokens grow with its length as real text's do: a cache that keeps every
#: pre-token measured 9,336 KiB; the reference's bounded cache 364 KiB.
STREAM_BYTES = 2_000_000
PEAK_GROWTH_BOUND_KIB = 1024


def own_encode(impl, tok, text: str) -> list[int]:
    """The implementation's own ``encode(text)``, which encode_iterable must
    equal. Where encode itself raises, the input tells nothing about
    encode_iterable (the encode and special-token items report it): a
    Hypothesis test drops the input, another test is skipped with the reason.
    The failure is not counted as a repeated failure of this test."""
    try:
        with impl.repeats.paused():
            return list(tok.encode(text))
    except SubmissionError as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        reason = (
            f"the implementation's own encode raises {type(exc).__name__}: {first} on this input; "
            "encode_iterable is compared with its own encode, on inputs encode handles"
        )
    if currently_in_test_context():
        note(reason)
        reject()
    pytest.skip(reason)


def _encode_or_none(impl, tok, text: str) -> list[int] | None:
    """For hints: the implementation's encode(text), None where it raises."""
    try:
        with impl.repeats.paused():
            return list(tok.encode(text))
    except SubmissionError:
        return None


#: The second inputs of every encode_iterable test. Lines with blank lines and
#: whitespace runs across them, and a word cut in two (" th" + "e": encoding
#: each chunk on its own differs from encoding the text here, as skipping the
#: blank lines or dropping the end does); and, where the tokenizer has special
#: tokens, a long chunk whose end is the first half of one (a buffer flushed
#: there must hold it back: :func:`second_cut_stream`). A cause is named only
#: when its replay gives the implementation's ids on its second input, where
#: they are wrong.
SECOND_STREAM = ["Hello  world.\n", "\n", "\n", "  th", "e cat", " sat down\n", "\n", "on the mat"]

_PER_CHUNK = (
    "each chunk encoded on its own: pre-tokens (whitespace runs across blank lines) and special tokens can span chunks"
)
_CUT_SPECIAL = (
    "a special token cut by a chunk boundary is encoded as ordinary text (held back as a pre-token, not as a special)"
)


def _iterable_causes(impl, tok, chunks: list[str], got: list[int], expected: list[int], specials=()) -> list[str]:
    """The known encode_iterable bugs whose replay on ``chunks`` gives ``got``."""
    causes = []
    per_chunk = [_encode_or_none(impl, tok, c) for c in chunks]
    if None not in per_chunk and got == [i for ids in per_chunk for i in ids]:
        causes.append(_PER_CHUNK)
    if any(not c.strip() for c in chunks) and got == _encode_or_none(
        impl, tok, "".join(c for c in chunks if c.strip())
    ):
        causes.append("whitespace-only chunks (blank lines) are skipped")
    if specials and got == _cut_special_replay(impl, tok, chunks, specials):
        causes.append(_CUT_SPECIAL)
    # (An exact match above also explains a short output.)
    if not causes and not got:
        causes.append("encode_iterable yields nothing at all for this stream")
    elif not causes and len(got) < len(expected) and got == expected[: len(got)]:
        causes.append("the end of the stream is never encoded: the first ids are right, the last ones are missing")
    return causes


def _cut_special_replay(impl, tok, chunks: list[str], specials) -> list[int] | None:
    """encode of the joined text where every special token that spans a chunk
    boundary is ordinary text, from the implementation's own encode (the text
    around such a token in one piece, its pre-tokens one by one); None when
    no special token spans a boundary or that encode raises."""
    text = "".join(chunks)
    bounds = set(itertools.accumulate(len(c) for c in chunks))
    groups: list[tuple[str, list[tuple[int, int]]]] = []  # (text, cut special spans in it) or (special, None)
    pos, cut_any = 0, False
    for piece, special in split_on_specials(text, specials):
        cut = special and any(pos < b < pos + len(piece) for b in bounds)
        cut_any |= cut
        if special and not cut:
            groups.append((piece, None))
        else:
            if not groups or groups[-1][1] is None:
                groups.append(("", []))
            start = len(groups[-1][0])
            spans = groups[-1][1] + ([(start, start + len(piece))] if cut else [])
            groups[-1] = (groups[-1][0] + piece, spans)
        pos += len(piece)
    if not cut_any:
        return None
    parts: list[str] = []
    for piece, spans in groups:
        if spans is None:
            parts.append(piece)
            continue
        run, at = "", 0
        for pretoken in pretokenize(piece):
            end = at + len(pretoken)
            if any(a < end and at < b for a, b in spans):
                parts += [run, pretoken]
                run = ""
            else:
                run += pretoken
            at = end
        parts.append(run)
    ids: list[int] = []
    for part in parts:
        encoded = _encode_or_none(impl, tok, part) if part else []
        if encoded is None:
            return None
        ids += encoded
    return ids


def _second_causes(impl, tok, specials=()) -> list[str]:
    """The causes a second input confirms: each on its own second input
    (:data:`SECOND_STREAM`; a special token cut at a flush on
    :func:`second_cut_stream`), where the implementation's ids are wrong and
    the replay gives them. None where the implementation is right there (a
    replay that is right there too is no evidence) or where its own encode
    fails there (nothing to compare with)."""
    confirmed = [c for c in _second_input_causes(impl, tok, SECOND_STREAM, specials) if c != _CUT_SPECIAL]
    if specials and _CUT_SPECIAL in _second_input_causes(impl, tok, second_cut_stream(), specials):
        confirmed.append(_CUT_SPECIAL)
    return confirmed


def _second_input_causes(impl, tok, chunks: list[str], specials) -> list[str]:
    expected = _encode_or_none(impl, tok, "".join(chunks))
    if expected is None:
        return []
    got = list(tok.encode_iterable(iter(chunks)))
    return [] if got == expected else _iterable_causes(impl, tok, chunks, got, expected, specials)


def second_cut_stream() -> list[str]:
    """A chunk longer than common flush thresholds whose end is the first
    eight characters of <|endoftext|>, then the rest: a cut where encoding
    each chunk on its own differs from encoding the special token as text."""
    return [long_prefix("see " + EOT[:8]), EOT[8:] + " then"]


def assert_iterable_equals_encode(impl, tok, chunks: list[str], *, rule: str, specials=()) -> None:
    """encode_iterable(chunks) == the implementation's own encode of the joined
    text; else the first difference, and the likely causes confirmed on the
    second inputs (``specials``: the tokenizer's special tokens)."""
    __tracebackhide__ = True
    text = "".join(chunks)
    expected = own_encode(impl, tok, text)
    got = list(tok.encode_iterable(iter(chunks)))
    if got == expected:
        return
    causes = hints.confirmed(
        _iterable_causes(impl, tok, chunks, got, expected, specials), lambda: _second_causes(impl, tok, specials)
    )
    k = next((n for n, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
    message = (
        f"{rule} (compared with the implementation's own encode of the joined text): first difference "
        f"at id {k}: got {got[max(0, k - 3) : k + 4]}, expected "
        f"{expected[max(0, k - 3) : k + 4]} (lengths {len(got)} vs {len(expected)})"
    )
    message += hints.likely_causes(causes, own_line=True)
    raise AssertionError(message + f"\n  input chunks: {show_chunks(chunks)}")


def show_chunks(chunks: list[str], *, edge: int = 40, most: int = 40) -> str:
    """The chunks' repr, long ones cut in the middle, long lists shown by
    their first few and last chunks (where a long text's interesting end is)."""

    def one(c: str) -> str:
        return repr(c) if len(c) <= 2 * edge else f"{c[:edge]!r} ... ({len(c):,} chars) ... {c[-edge:]!r}"

    if len(chunks) <= most:
        return f"[{', '.join(map(one, chunks))}]"
    head, tail = chunks[:5], chunks[5 - most :]
    return f"[{', '.join(map(one, head))}, ... {len(chunks) - most} more ..., {', '.join(map(one, tail))}]"


SPECIALS = [(EOT,), (EOT, DOUBLE)]
SPECIALS_IDS = ["eot", "overlapping_specials"]


@pytest.mark.spec("1.3.encode_iterable")
@pytest.mark.parametrize("specials", SPECIALS, ids=SPECIALS_IDS)
@given(lt=lined_texts(specials=(EOT,)))
@example(lt=LinedText("a\n\n\nb", ["a\n", "\n", "\n", "b"]))  # a run of blank lines
@example(lt=LinedText("a\n  b\n", ["a\n", "  b\n"]))  # a line that starts with spaces
@example(lt=LinedText("a  \n \n\n", ["a  \n", " \n", "\n"]))  # whitespace-only lines
@example(lt=LinedText(f"x{EOT}\n\n{DOUBLE}y\n", [f"x{EOT}\n", "\n", f"{DOUBLE}y\n"]))
@example(lt=LinedText(f"{EOT}\n\ntesting!", [f"{EOT}\n", "\n", "testing!"]))  # official fixture
def test_encode_iterable_equals_encode_over_lines(get_tokenizer, impl, specials, lt: LinedText):
    """encode_iterable(lines) == encode(text) when the chunks are the lines of
    the text, endings kept, as a file handle gives them: blank lines, runs of
    whitespace across lines and special tokens included."""
    tok = slow_case(get_tokenizer, specials).tokenizer
    assert_iterable_equals_encode(
        impl, tok, lt.lines, rule=f"SPEC 1.3: encode_iterable over lines, specials {list(specials)}", specials=specials
    )


@pytest.mark.spec("1.3.encode_iterable")
@pytest.mark.strict
@pytest.mark.parametrize("specials", SPECIALS, ids=SPECIALS_IDS)
@given(ct=chunked_texts(specials=(EOT,)))
@example(ct=ChunkedText("a   b", ["a  ", " b"]))  # cut inside a whitespace run
@example(ct=ChunkedText("x\n\n\ny", ["x\n", "\n", "\ny"]))
@example(ct=ChunkedText(f"a{EOT}b", ["a<|endo", "ftext|>b"]))  # cut inside a special token
@example(ct=ChunkedText(f"{EOT}{EOT}", [EOT[:5], EOT[5:] + EOT[:3], EOT[3:]]))
@example(ct=ChunkedText("hello world", ["hel", "", "lo", " wor", "ld"]))
@example(ct=ChunkedText("don't", ["don", "'", "t"]))
def test_encode_iterable_equals_encode_for_any_chunking(get_tokenizer, impl, specials, ct: ChunkedText):
    """STRICT: encode_iterable(chunks) == encode("".join(chunks)) however the
    text is cut: mid-word, mid-whitespace-run, mid-special-token, empty chunks."""
    tok = slow_case(get_tokenizer, specials).tokenizer
    assert_iterable_equals_encode(
        impl,
        tok,
        ct.chunks,
        rule=f"SPEC 1.3 (STRICT): encode_iterable with any chunking, specials {list(specials)}",
        specials=specials,
    )


#: A prefix longer than common flush thresholds (64K characters, ...), so that
#: buffering implementations encode part of the stream before the interesting
#: cut; its tail is what must carry over.
LONG_PREFIX_CHARS = 70_000
PREFIX_TAILS = (
    "",
    " ",
    "   ",
    "\n\n",
    "don",
    "'",
    "12",
    "<|endof",
    EOT,
    f"{EOT}<|endo",
    "é",
    "a \n",
)


def long_prefix(tail: str) -> str:
    body = sample_training_text()
    return (body * (LONG_PREFIX_CHARS // len(body) + 1))[:LONG_PREFIX_CHARS] + tail


#: Each example streams 70,000 characters through the implementation twice:
#: a few cover the tails (the explicit examples pin the worst ones).
LONG_PREFIX_EXAMPLES = 10
#: Ends of a long text whose next lines continue a whitespace run or follow a
#: special token: what a buffering implementation must carry over at a flush.
LINE_TAILS = ("\n", "\n\n", "  \n", " \n\n", EOT + "\n", "\n" + EOT + "\n\n", "don't\n", "é\n")


@pytest.mark.spec("1.3.encode_iterable")
@pytest.mark.parametrize("specials", SPECIALS, ids=SPECIALS_IDS)
@settings(max_examples=LONG_PREFIX_EXAMPLES)
@given(tail=st.sampled_from(LINE_TAILS), lt=lined_texts(specials=(EOT,)))
@example(tail="\n\n", lt=LinedText("\n b\n", ["\n", " b\n"]))
@example(tail=EOT + "\n", lt=LinedText(f"\n{EOT}x", ["\n", f"{EOT}x"]))
def test_encode_iterable_equals_encode_over_lines_after_a_long_prefix(
    get_tokenizer, impl, specials, tail, lt: LinedText
):
    """The same over the lines of a text longer than common flush thresholds
    (70,000 characters), whose end continues across the next lines."""
    tok = slow_case(get_tokenizer, specials).tokenizer
    assert_iterable_equals_encode(
        impl,
        tok,
        file_lines(long_prefix(tail) + lt.text),
        rule=f"SPEC 1.3: encode_iterable over the lines of a long text, specials {list(specials)}",
        specials=specials,
    )


@pytest.mark.spec("1.3.encode_iterable")
@pytest.mark.strict
@pytest.mark.parametrize("specials", SPECIALS, ids=SPECIALS_IDS)
@given(tail=st.sampled_from(PREFIX_TAILS), ct=chunked_texts(specials=(EOT,)))
@example(tail="  ", ct=ChunkedText(" b", [" b"]))
@example(tail="<|endof", ct=ChunkedText("text|>x", ["text|", ">x"]))
@example(tail=EOT, ct=ChunkedText(EOT + "a", [EOT[:4], EOT[4:] + "a"]))
def test_encode_iterable_equals_encode_after_a_long_prefix(get_tokenizer, impl, specials, tail: str, ct: ChunkedText):
    """STRICT: the same after a 70,000-character first chunk ending in a
    pre-token, whitespace run or special token that the next chunks continue."""
    tok = slow_case(get_tokenizer, specials).tokenizer
    assert_iterable_equals_encode(
        impl,
        tok,
        [long_prefix(tail), *ct.chunks],
        rule=f"SPEC 1.3 (STRICT): encode_iterable after a long chunk, any chunking, specials {list(specials)}",
        specials=specials,
    )


@pytest.mark.spec("1.3.encode_iterable")
@pytest.mark.parametrize("name", FIXTURE_TEXTS)
def test_encode_iterable_file_lines_fixtures(get_tokenizer, impl, fixtures_dir, name):
    """Iterating a file handle's lines gives encode(whole file) (GPT-2 merges)."""
    tok = gpt2_case(get_tokenizer, fixtures_dir).tokenizer
    expected = own_encode(impl, tok, (fixtures_dir / name).read_bytes().decode("utf-8"))
    with open(fixtures_dir / name, encoding="utf-8", newline="") as f:
        got = list(tok.encode_iterable(f))
    assert_equal(got, expected, rule=f"SPEC 1.3: encode_iterable(open({name!r})) == encode(contents)")


@pytest.mark.spec("1.3.encode_iterable")
def test_encode_iterable_file_lines(get_tokenizer, impl, tmp_path):
    """Iterating a file handle's lines gives encode(whole file) (built-in text)."""
    path = tmp_path / "sample.txt"
    path.write_bytes(sample_training_text().encode("utf-8"))
    tok = slow_case(get_tokenizer).tokenizer
    expected = own_encode(impl, tok, sample_training_text())
    with open(path, encoding="utf-8", newline="") as f:
        got = list(tok.encode_iterable(f))
    assert_equal(
        got,
        expected,
        rule="SPEC 1.3: encode_iterable(file) == encode",
    )


class _PullLimitReached(Exception):
    pass


class CountingStream:
    """An endless-looking stream of lines that counts what it gives and refuses
    to go past ``limit_chars`` (so a non-lazy implementation fails fast instead
    of hanging)."""

    def __init__(self, lines: list[str], limit_chars: int):
        self.lines, self.limit_chars, self.pulled, self.chars = lines, limit_chars, 0, 0

    def __iter__(self) -> Iterator[str]:
        for line in itertools.cycle(self.lines):
            if self.chars >= self.limit_chars:
                raise _PullLimitReached
            self.pulled += 1
            self.chars += len(line)
            yield line


_READS_ALL = "the whole iterable read before the first id is yielded (''.join(iterable) or list(iterable))"


def _reads_all_causes(impl, tok) -> list[str]:
    """The second input of the laziness test: on a finite stream (the lines of
    the built-in text), the bug's replay pulls every line before the first id
    and then yields encode of the joined text. Named when the implementation
    does exactly that."""
    lines = sample_training_text().splitlines(keepends=True)
    pulled = 0

    def counted() -> Iterator[str]:
        nonlocal pulled
        for line in lines:
            pulled += 1
            yield line

    ids = iter(tok.encode_iterable(counted()))
    first = next(ids, None)
    at_first = pulled
    got = [] if first is None else [first, *ids]
    return [_READS_ALL] if at_first == len(lines) and got == own_encode(impl, tok, "".join(lines)) else []


@pytest.mark.spec("1.3.encode_iterable")
def test_encode_iterable_is_lazy(get_tokenizer, impl):
    """encode_iterable yields ids before it has consumed its whole input (an
    iterator over an endless stream gives its first ids)."""
    tok = slow_case(get_tokenizer).tokenizer
    lines = ["The cat sat on the mat.\n", "It's 12 o'clock<|endoftext|>Then\n", "\n"]
    expected = own_encode(impl, tok, "".join(lines * 4))[:10]
    stream = CountingStream(lines, LAZY_PULL_LIMIT_CHARS)
    try:
        first = list(itertools.islice(tok.encode_iterable(iter(stream)), 10))
    except _PullLimitReached:
        causes = hints.confirmed([_READS_ALL], lambda: _reads_all_causes(impl, tok))
        raise AssertionError(
            f"SPEC 1.3: encode_iterable read {stream.pulled:,} lines ({stream.chars:,} characters) of an "
            "endless stream without yielding 10 ids: it must yield as it reads, not after the whole iterable"
            + hints.likely_causes(causes)
        ) from None
    assert_equal(
        first,
        expected,
        rule="SPEC 1.3: first ids of encode_iterable on an endless stream",
        context=f"after pulling {stream.pulled} lines",
    )


@pytest.mark.spec("1.3.encode_iterable.memory")
def test_encode_iterable_memory_is_bounded(get_tokenizer, impl):
    """SHOULD: memory bounded independently of the stream length. Measured as
    the growth of the peak resident set of the implementation's process
    (Linux VmHWM, reset first, read by the judge from /proc) while a 2 MB
    stream whose distinct pre-tokens keep growing (a new number on every
    line) is encoded and its ids counted, not kept."""
    tok = slow_case(get_tokenizer).tokenizer
    unit = sample_training_text()[:4000].splitlines(keepends=True)
    for _ in tok.encode_iterable(iter(unit * 50)):  # warm caches, lazy imports, buffers
        pass

    def growth_kib(chars: int, fresh: bool) -> float:
        impl.reset_peak()
        before = impl.memory_kib()["VmRSS"]
        count = sum(1 for _ in tok.encode_iterable(memory_stream_lines(chars, fresh=fresh)))
        assert count > 0, "encode_iterable yielded nothing for a non-empty stream"
        return impl.memory_kib()["VmHWM"] - before

    try:
        growth = growth_kib(STREAM_BYTES, True)
    except (OSError, RuntimeError, KeyError) as exc:
        pytest.skip(f"peak-memory measurement needs Linux /proc of the worker: {exc}")
    if growth > PEAK_GROWTH_BOUND_KIB:
        hint = encode_iterable_memory_hint(
            growth_kib, stream_chars=STREAM_BYTES, observed_kib=growth, bound_kib=PEAK_GROWTH_BOUND_KIB
        )
        raise AssertionError(
            f"SPEC 1.3 (SHOULD): encoding a {STREAM_BYTES / 1e6:g} MB stream raised peak memory by "
            f"{growth:.0f} KiB, bound {PEAK_GROWTH_BOUND_KIB} KiB" + (f"\n  likely cause: {hint}" if hint else "")
        )
