"""SPEC §1.3 special tokens: each occurrence is exactly one id, the longest
match wins, without a special list the same characters are ordinary text, and
specials absent from the vocabulary are added: each gets one id that no other
token has and decodes back. STRICT: those ids are the next free ones (the
handout says "append" without fixing the ids)."""

import pytest
from hypothesis import example, given

from lmspec.conformance import hints
from lmspec.conformance.asserts import assert_equal
from lmspec.conformance.cs336.oracles.tokenizer import EOT, assert_encodes, slow_trained_vocab, special_id_causes
from lmspec.conformance.cs336.strategies.tokenizer import tokenizer_text
from lmspec.conformance.cs336.test_tokenizer import make_case, slow_case
from lmspec.conformance.plain import raised

PAD = "<|pad|>"
DOUBLE = EOT + EOT


def one_id(tok, special: str) -> int:
    __tracebackhide__ = True
    ids = list(tok.encode(special))
    assert len(ids) == 1, f"SPEC 1.3: the special token {special!r} must encode to one id, got {ids}"
    return ids[0]


@pytest.mark.spec("1.3.special_tokens")
@given(text=tokenizer_text(specials=(EOT, PAD)))
@example(text=EOT)
@example(text=f"a{EOT}b{EOT}{EOT} {PAD}\n{EOT}")
@example(text=f"hello{EOT}world{PAD}{PAD}don't")
def test_special_token_occurrence_is_one_id(get_tokenizer, text: str):
    """Every occurrence of a special token in the text is exactly one id, and
    the text around it is encoded as if the special were a boundary."""
    c = slow_case(get_tokenizer, (EOT, PAD))  # EOT in the vocab, PAD added
    ids = list(c.tokenizer.encode(text))
    for special in (EOT, PAD):
        sid = c.oracle.special_ids[special]
        assert_equal(
            ids.count(sid),
            text.count(special),
            rule=f"SPEC 1.3: occurrences of {special!r} in the text vs its id {sid} in encode()",
            context=f"{text!r} -> {ids}",
        )
    assert_encodes(c.oracle, ids, text, rule="SPEC 1.3: encode with special tokens", encode=c.tokenizer.encode)


@pytest.mark.spec("1.3.special_tokens")
@pytest.mark.parametrize(
    "specials",
    [(EOT, DOUBLE), (DOUBLE, EOT), ("<|x|>", "[<|x|>]"), ("[<|x|>]", "<|x|>")],
    ids=[
        "short_listed_first",
        "long_listed_first",
        "substring_short_first",
        "substring_long_first",
    ],
)
def test_special_tokens_longest_match_wins(get_tokenizer, specials):
    """When special tokens overlap (one is a prefix or substring of another),
    the longest match wins, whatever the order of the list."""
    c = slow_case(get_tokenizer, specials)
    # The second input: another kind of pair. With <|endoftext|> (in the
    # vocabulary) and the absent <|endoftext|><|endoftext|>, adding no absent
    # special gives the ids of the shortest match on every text (so: two absent
    # specials, one a prefix of the other); with two absent specials, so does
    # splitting on no special at all (so: one special in the vocabulary).
    other = ("<|x|>", "<|x|>y") if EOT in specials else (EOT, DOUBLE)

    def second_case():
        o = slow_case(get_tokenizer, other)
        return o.oracle, o.tokenizer.encode

    long, short = sorted(specials, key=len, reverse=True)
    for text in (long, short + long, long + short, f"a{long}b{short}c", short * 3):
        assert_encodes(
            c.oracle,
            c.tokenizer.encode(text),
            text,
            rule=f"SPEC 1.3: overlapping specials {list(specials)}: the longest match wins",
            encode=c.tokenizer.encode,
            second_case=second_case,
        )
    assert_equal(
        list(c.tokenizer.encode(long)),
        [c.oracle.special_ids[long]],
        rule=f"SPEC 1.3: {long!r} is one special token, not {short!r} plus text",
    )


@pytest.mark.spec("1.3.special_tokens")
@pytest.mark.parametrize("specials", [None, []], ids=["None", "empty_list"])
def test_special_token_text_without_special_list_is_ordinary(get_tokenizer, specials):
    """Without special tokens, "<|endoftext|>" is ordinary text: several ids
    (BPE over its pre-tokens), and it round-trips."""
    c = slow_case(get_tokenizer, specials)
    text = f"story{EOT}next {EOT}"
    ids = list(c.tokenizer.encode(text))
    assert_encodes(
        c.oracle,
        ids,
        text,
        rule="SPEC 1.3: without a special list the characters are ordinary text",
        encode=c.tokenizer.encode,
    )
    assert len(list(c.tokenizer.encode(EOT))) > 1, "SPEC 1.3: <|endoftext|> without a special list is several ids"
    assert_equal(
        c.tokenizer.decode(ids),
        text,
        rule="SPEC 1.3: round trip of special-token text as ordinary text",
    )


@pytest.mark.spec("1.3.special_tokens")
def test_special_token_in_vocab_keeps_its_id(get_tokenizer):
    """A special token whose bytes are already in the vocabulary uses that id."""
    vocab, _ = slow_trained_vocab()
    eot_id = next(i for i, b in vocab.items() if b == EOT.encode())
    c = slow_case(get_tokenizer, (EOT,))
    assert_equal(
        one_id(c.tokenizer, EOT),
        eot_id,
        rule="SPEC 1.3: special token already in vocab keeps its id",
    )
    assert_equal(c.tokenizer.decode([eot_id]), EOT, rule="SPEC 1.3: decode of a special token id")


ABSENT = [("<|user|>",), ("<|user|>", "<|assistant|>"), (EOT, "<|user|>", "<|assistant|>")]
ABSENT_IDS = ["one", "two", "two_after_a_present_one"]


def special_id_problem(vocab: dict[int, bytes], special: str, ids: list[int], others: dict[str, int]) -> str | None:
    """Why ``ids = encode(special)`` is not one new id for an added special, or None."""
    if len(ids) != 1:
        pieces = [vocab.get(i) for i in ids]
        as_text = None not in pieces and b"".join(pieces) == special.encode("utf-8")  # type: ignore[arg-type]
        return f"encodes to {len(ids)} ids {ids}, not one" + (" (its characters as ordinary text)" if as_text else "")
    (i,) = ids
    if i in vocab:
        return f"got id {i}, which is already the id of {vocab[i]!r} in the vocabulary"
    clash = [s for s, j in others.items() if j == i]
    if clash:
        return f"got id {i}, the same id as {clash[0]!r}"
    return None


def _special_id_causes(get_tokenizer, specials) -> list[str]:
    """The known special-token id bugs (oracles/tokenizer.py KNOWN_BUGS) whose
    replay gives what the implementation's encode gives for each of
    ``specials``, present and absent ones, on the slow vocabulary."""
    vocab, merges = slow_trained_vocab()
    tok = make_case(get_tokenizer, "slow", vocab, merges, specials).tokenizer
    return special_id_causes(tok.encode, vocab, merges, specials)


@pytest.mark.spec("1.3.special_tokens")
@pytest.mark.parametrize("specials", ABSENT, ids=ABSENT_IDS)
def test_absent_special_tokens_are_added(get_tokenizer, specials):
    """Special tokens missing from the vocabulary are added: each encodes to
    one id that no token of the vocabulary and no other special has, and
    decodes back to itself (which id is the implementation's choice). A
    likely cause is named when its replay gives the implementation's ids for
    these specials and for those of the second input (the other list with
    two absent ones: one with a present special beside them, one without)."""
    vocab, merges = slow_trained_vocab()
    tok = make_case(get_tokenizer, "slow", vocab, merges, specials).tokenizer
    second = hints.other(specials, ABSENT[2], ABSENT[1])
    got: dict[str, int] = {}
    for s in specials:  # every added id first, then what each decodes to
        if s.encode("utf-8") in vocab.values():
            continue
        try:
            ids = list(tok.encode(s))
        except Exception as exc:  # the implementation's exception: reported, with its likely cause
            problem = f"encode raised {raised(exc)}"
        else:
            problem = special_id_problem(vocab, s, ids, got)
        if problem is not None:
            causes = hints.confirmed(
                _special_id_causes(get_tokenizer, specials), lambda: _special_id_causes(get_tokenizer, second)
            )
            raise AssertionError(
                f"SPEC 1.3: special token {s!r}, absent from a vocab of ids 0..{len(vocab) - 1}, "
                f"must be added as one new id: {problem}{hints.likely_causes(causes)}"
                f"\n  special tokens {list(specials)}"
            )
        got[s] = ids[0]
    for s, i in got.items():
        assert_equal(tok.decode([i]), s, rule=f"SPEC 1.3: decode of the id {i} added for {s!r}")
    text = f"hi{specials[-1]}there{specials[0]} {specials[-1]}"
    assert_equal(
        tok.decode(tok.encode(text)),
        text,
        rule="SPEC 1.3: round trip with added specials",
    )


@pytest.mark.spec("1.3.special_tokens")
@pytest.mark.strict
@pytest.mark.parametrize("specials", ABSENT, ids=ABSENT_IDS)
def test_absent_special_tokens_get_next_free_ids(get_tokenizer, specials):
    """STRICT: the added special tokens take the next free ids
    (len(vocab), len(vocab)+1, ... for a vocab of ids 0..len-1)."""
    vocab, merges = slow_trained_vocab()
    tok = make_case(get_tokenizer, "slow", vocab, merges, specials).tokenizer
    absent = [s for s in specials if s.encode("utf-8") not in vocab.values()]
    got = {s: list(tok.encode(s)) for s in absent}
    free = set(range(len(vocab), len(vocab) + len(absent)))
    assert sorted(i for ids in got.values() for i in ids) == sorted(free), (
        f"SPEC 1.3 (STRICT): specials {absent} absent from a vocab of ids 0..{len(vocab) - 1} "
        f"should get the next free ids {sorted(free)}, got {got}"
    )
