"""SPEC §1.3 decode: concatenate the ids' bytes, decode UTF-8 with
errors="replace"; decode(encode(s)) == s. STRICT: unknown ids raise (the
handout does not say: returning U+FFFD or skipping them is correct under MUST)."""

import pytest
from hypothesis import example, given

from lmspec.conformance import hints
from lmspec.conformance.asserts import assert_equal
from lmspec.conformance.cs336.oracles.tokenizer import EOT, decode_causes
from lmspec.conformance.cs336.strategies.tokenizer import tokenizer_text, unicode_text
from lmspec.conformance.cs336.test_tokenizer import TRAPS, Case, case, make_case, pin_traps, slow_case  # noqa: F401 (fixture)
from lmspec.conformance.plain import raised

#: Byte sequences that are not valid UTF-8 on their own, and what Python's
#: errors="replace" makes of them (one U+FFFD per maximal invalid subpart).
MALFORMED = {
    "lone_continuation_byte": (b"\x80",),
    "truncated_2_byte": (b"\xc3",),
    "truncated_3_byte": (b"\xe2", b"\x82"),
    "invalid_byte_ff": (b"\xff",),
    "continuation_between_letters": (b"a", b"\xa9", b"b"),
    "overlong_encoding": (b"\xc0", b"\xaf"),
    "truncated_emoji_then_text": (b"\xf0", b"\x9f", b"\x98", b"a"),
}


def byte_vocab_case(get_tokenizer) -> Case:
    """A tokenizer whose vocab is just the 256 bytes (ids shuffled away from
    byte values, so id != byte is exercised) and no merges."""
    vocab = {i: bytes([(i * 7 + 3) % 256]) for i in range(256)}
    return make_case(get_tokenizer, "bytes_only", vocab, [], None)


def ids_of(c: Case, pieces) -> list[int]:
    inverse = {v: k for k, v in c.oracle.vocab.items()}
    return [inverse[p] for p in pieces]


@pytest.mark.spec("1.3.decode")
@pin_traps
@given(text=unicode_text() | tokenizer_text(specials=(EOT,)))
@example(text="".join(TRAPS))
@example(text="naïve café 😀👍🏽 東京")
def test_decode_round_trips_any_text(case: Case, text: str):  # noqa: F811
    """decode(encode(s)) == s for every string without lone surrogates."""
    ids = list(case.tokenizer.encode(text))
    assert_equal(
        case.tokenizer.decode(ids),
        text,
        rule=f"SPEC 1.3: decode(encode(s)) == s ({case.name} merges)",
        context=f"ids {ids[:20]}",
    )


@pytest.mark.spec("1.3.decode")
@pytest.mark.parametrize("name", list(MALFORMED))
def test_decode_malformed_bytes_become_replacement_character(get_tokenizer, name: str):
    """Malformed UTF-8 decodes to U+FFFD (errors="replace"), never raises."""
    c = byte_vocab_case(get_tokenizer)
    pieces = MALFORMED[name]
    expected = b"".join(pieces).decode("utf-8", errors="replace")
    try:
        got = c.tokenizer.decode(ids_of(c, pieces))
    except UnicodeDecodeError as exc:
        raise AssertionError(
            f"SPEC 1.3: decode of bytes {b''.join(pieces)!r} raised {raised(exc)}"
            "\n  likely cause: bytes.decode('utf-8') without errors='replace'"
        ) from None
    if got == expected:
        return
    # The second input: another malformed sequence on which both bugs differ from the rule.
    second = MALFORMED[hints.other(name, "continuation_between_letters", "truncated_emoji_then_text")]
    causes = hints.confirmed(_decode_causes(pieces, got), lambda: _decode_causes(second, _decoded(c, second)))
    raise AssertionError(
        f"SPEC 1.3: decode of bytes {b''.join(pieces)!r}: got {got!r}, expected {expected!r}"
        + hints.likely_causes(causes, own_line=True)
    )


_PER_ID = "each id's bytes decoded on their own, then joined"


def _decoded(c: Case, pieces) -> str:
    return c.tokenizer.decode(ids_of(c, pieces))


def _decode_causes(pieces, got: str) -> list[str]:
    """The known decode bugs (oracles/tokenizer.py KNOWN_BUGS) whose replay
    on ``pieces`` (one id each, in a vocabulary of single bytes) gives ``got``."""
    vocab = {i: p for i, p in enumerate(dict.fromkeys(pieces))}
    ids_by_piece = {p: i for i, p in vocab.items()}
    return decode_causes(vocab, [ids_by_piece[p] for p in pieces], got)


@pytest.mark.spec("1.3.decode")
def test_decode_joins_bytes_before_decoding(get_tokenizer):
    """A character split over several ids decodes whole: bytes are
    concatenated first, then decoded once."""
    c = byte_vocab_case(get_tokenizer)
    text, second = "é😀ü", "ß€🎉"
    pieces = _one_id_per_byte(text)
    got = _decoded(c, pieces)
    if got == text:
        return
    causes = hints.confirmed(
        [cause for cause in _decode_causes(pieces, got) if cause == _PER_ID],
        lambda: _decode_causes(_one_id_per_byte(second), _decoded(c, _one_id_per_byte(second))),
    )
    raise AssertionError(
        f"SPEC 1.3: decode of one id per byte of {text!r} gave {got!r}" + hints.likely_causes(causes, own_line=True)
    )


def _one_id_per_byte(text: str) -> list[bytes]:
    return [bytes([b]) for b in text.encode("utf-8")]


@pytest.mark.spec("1.3.decode")
def test_decode_empty_list_is_empty_string(get_tokenizer):
    assert_equal(slow_case(get_tokenizer).tokenizer.decode([]), "", rule="SPEC 1.3: decode([]) == ''")


@pytest.mark.spec("1.3.decode")
@pytest.mark.strict
@pytest.mark.parametrize("where", ["past_the_end", "far_past_the_end", "negative"])
def test_decode_unknown_id_raises(get_tokenizer, where: str):
    """STRICT: an id that is not in the vocabulary raises (any exception),
    never a silent wrong answer: not skipped, not U+FFFD, not wrapped around
    (-1 is not the last id)."""
    c = slow_case(get_tokenizer)
    n = max(c.oracle.full_vocab) + 1
    ids = _with_unknown_id(c, "hello world", {"past_the_end": n, "far_past_the_end": n + 10**6, "negative": -1}[where])
    try:
        got = c.tokenizer.decode(ids)
    except Exception:
        return
    # The second input: another text, another unknown id of the same kind.
    second = _with_unknown_id(
        c, "the cat sat, 42", {"past_the_end": n + 3, "far_past_the_end": n + 10**7}.get(where, -2)
    )
    causes = hints.confirmed(
        decode_causes(c.oracle.full_vocab, ids, got),
        lambda: decode_causes(c.oracle.full_vocab, second, c.tokenizer.decode(second)),
    )
    raise AssertionError(
        f"SPEC 1.3 (STRICT): decode({ids}) with unknown id {ids[1]} returned {got!r} instead of raising "
        f"(vocabulary has ids 0..{n - 1}){hints.likely_causes(causes)}"
    )


def _with_unknown_id(c: Case, text: str, bad: int) -> list[int]:
    """The ids of ``text`` with ``bad`` put second."""
    known = c.oracle.encode(text)
    return [*known[:1], bad, *known[1:]]
