"""Single-switch catalog of §1 (the tokenizer and the trained vocabulary),
generated from the registries: for every known bug of the special-token ids
and of decode (conformance/cs336/oracles/tokenizer.py KNOWN_BUGS) and of the
trained vocabulary (bpe_replay.VOCAB_BUGS), an implementation that IS that
switch, and nothing else, goes through the item's own test, fails on its
input and is confirmed on the test's second input: the failure must name
exactly that cause. A switch registered later needs an input here
(``SPECIAL_INPUT`` / ``DECODE_INPUTS``), or this catalog fails."""

import contextlib
import types

import pytest
from switch_catalog import failure_causes

from lmspec.conformance.cs336 import (
    test_tokenizer,
    test_tokenizer_decode,
    test_tokenizer_iterable,
    test_tokenizer_specials,
    test_train_bpe,
)
from lmspec.conformance.cs336.oracles import bpe_replay
from lmspec.conformance.cs336.oracles.tokenizer import EOT, KNOWN_BUGS, EncodeOracle, slow_trained_vocab
from lmspec.conformance.hints import named_causes

#: make_case caches a tokenizer per id(get_tokenizer): keep every factory alive
#: so that no id is reused by another switch's.
_FACTORIES: list = []


class _Switched:
    """A correct tokenizer (the oracle) but for one switch: ``special`` gives
    what encode(s) is for each special token s (ids, or "raises KeyError"),
    ``decode`` replaces decode; ``no_merges``: it cannot be built without merges."""

    def __init__(self, vocab, merges, specials, *, special=None, decode=None, no_merges=False):
        if no_merges and not merges:
            raise ValueError("not enough values to unpack (expected 2, got 0)")
        self.oracle = EncodeOracle(vocab, merges, specials or ())
        self.outcomes = special(vocab, merges, list(specials or ())) if special else {}
        self._decode = decode

    def encode(self, text: str) -> list[int]:
        if text in self.outcomes:
            outcome = self.outcomes[text]
            if isinstance(outcome, str):
                raise KeyError(text)
            return list(outcome)
        return self.oracle.encode(text)

    def decode(self, ids) -> str:
        if self._decode is not None:
            return self._decode(self.oracle.full_vocab, list(ids))
        return b"".join(self.oracle.full_vocab[i] for i in ids).decode("utf-8", errors="replace")

    def encode_iterable(self, iterable):
        yield from self.encode("".join(iterable))  # reads everything first (the laziness switch)


def _factory(**switch):
    def get_tokenizer(vocab, merges, specials=None):
        return _Switched(vocab, merges, specials, **switch)

    _FACTORIES.append(get_tokenizer)
    return get_tokenizer


#: The special-token list each special-token switch is checked on (a present
#: special beside two absent ones tells every switch apart; the second input is
#: the other list).
SPECIAL_INPUT = test_tokenizer_specials.ABSENT[2]

#: The input each decode switch fails on: a malformed byte sequence, or where
#: the unknown id lies.
DECODE_INPUTS = {
    "errors='ignore' (malformed bytes must become U+FFFD, not vanish)": ("malformed", "truncated_3_byte"),
    "each id's bytes decoded on their own, then joined": ("malformed", "truncated_3_byte"),
    "an id outside the vocabulary skipped (vocab.get(i, b'')) instead of raising": ("unknown", "past_the_end"),
    "an id outside the vocabulary decoded as U+FFFD instead of raising": ("unknown", "far_past_the_end"),
    "the vocabulary indexed as a list: a negative id wraps around to the end (-1 is the last id) instead of raising": (
        "unknown",
        "negative",
    ),
}


@pytest.mark.parametrize("bug", KNOWN_BUGS.of("1.3.special_tokens"), ids=lambda b: b.cause[:50])
def test_a_special_token_switch_gets_exactly_its_cause(bug):
    get_tokenizer = _factory(special=bug.replay)
    check = lambda: test_tokenizer_specials.test_absent_special_tokens_are_added(get_tokenizer, SPECIAL_INPUT)
    assert failure_causes(check) == [bug.cause]


@pytest.mark.parametrize("bug", KNOWN_BUGS.of("1.3.decode"), ids=lambda b: b.cause[:50])
def test_a_decode_switch_gets_exactly_its_cause(bug):
    assert bug.cause in DECODE_INPUTS, f"a new decode switch needs its input in DECODE_INPUTS: {bug.cause}"
    get_tokenizer = _factory(decode=bug.replay)
    kind, name = DECODE_INPUTS[bug.cause]
    if kind == "malformed":
        check = lambda: test_tokenizer_decode.test_decode_malformed_bytes_become_replacement_character(
            get_tokenizer, name
        )
    else:
        check = lambda: test_tokenizer_decode.test_decode_unknown_id_raises(get_tokenizer, name)
    assert failure_causes(check) == [bug.cause]


def test_the_correct_tokenizer_passes_the_tests_the_switches_fail():
    get_tokenizer = _factory()
    test_tokenizer_specials.test_absent_special_tokens_are_added(get_tokenizer, SPECIAL_INPUT)
    test_tokenizer_decode.test_decode_malformed_bytes_become_replacement_character(get_tokenizer, "truncated_3_byte")


def test_a_cause_the_second_input_does_not_reproduce_is_notnamed():
    """A tokenizer that gives every absent special one shared id for one list
    of specials, and is right for the other (the test's second input), fails
    with the facts alone: one input is no evidence of a cause."""
    (one_id,) = [b for b in KNOWN_BUGS.of("1.3.special_tokens") if "computed once" in b.cause]
    failing = test_tokenizer_specials.ABSENT[1]

    def only_on_failing(vocab, merges, specials):
        return one_id.replay(vocab, merges, specials) if tuple(specials) == failing else {}

    get_tokenizer = _factory(special=only_on_failing)
    with pytest.raises(AssertionError) as failure:
        test_tokenizer_specials.test_absent_special_tokens_are_added(get_tokenizer, failing)
    assert "the same id as" in str(failure.value)
    assert named_causes(str(failure.value)) == []


@pytest.mark.parametrize("bug", list(bpe_replay.VOCAB_BUGS), ids=lambda b: b.cause[:50])
def test_a_vocab_switch_gets_exactly_its_cause(bug, tmp_path):
    """A trainer whose merges are right and whose vocab is the switch's."""

    def run_train_bpe(input_path, vocab_size, special_tokens):
        text = input_path.read_bytes().decode("utf-8")
        merges = bpe_replay.train_bpe(text, vocab_size, special_tokens).merges
        return dict(enumerate(bug.replay(merges, special_tokens))), merges

    text = "the cat sat on the mat<|endoftext|>the hat<|endoftext|>" * 3
    vocab, merges = test_train_bpe.train(run_train_bpe, tmp_path, text, 270, [EOT])
    check = lambda: test_train_bpe.check_vocab(vocab, merges, [EOT], run_train_bpe=run_train_bpe, corpus_dir=tmp_path)
    assert failure_causes(check) == [bug.cause]


def test_reading_the_whole_iterable_first_isnamed(monkeypatch):
    """encode_iterable that joins its input first: the laziness test names it,
    confirmed on a finite stream read whole before the first id."""
    monkeypatch.setattr(test_tokenizer_iterable, "LAZY_PULL_LIMIT_CHARS", 50_000)
    impl = types.SimpleNamespace(repeats=types.SimpleNamespace(paused=contextlib.nullcontext))
    named = failure_causes(lambda: test_tokenizer_iterable.test_encode_iterable_is_lazy(_factory(), impl))
    assert named == [test_tokenizer_iterable._READS_ALL]


def test_a_tokenizer_that_needs_a_merge_isnamed():
    """Built from an empty merge list it raises, from one merge it works:
    named, confirmed on the second vocabulary."""
    check = lambda: test_tokenizer.test_encode_with_no_merges_is_one_id_per_byte(_factory(no_merges=True))
    assert failure_causes(check) == [test_tokenizer.NO_MERGES]
    test_tokenizer.test_encode_with_no_merges_is_one_id_per_byte(_factory())


#: The special-token lists of the training tests (none, one, two).
TRAINING_SPECIALS = ([], [EOT], [EOT, "<|pad|>"])


@pytest.mark.parametrize("specials", TRAINING_SPECIALS, ids=len)
def test_the_training_second_input_tells_every_known_bug_apart(specials):
    """On test_train_bpe's second input every known training bug gives merges
    of its own, none of them the rule's: each can be confirmed there."""
    text = test_train_bpe.second_input_text(specials)
    size = 256 + len(specials) + test_train_bpe.SECOND_INPUT_MERGES
    runs = {(): bpe_replay.train_bpe(text, size, specials).merges}
    for cause, switch in bpe_replay.KNOWN_BUGS.items():
        if switch.keys() & {"split_specials", "drop_specials"} and not specials:
            continue
        merges = bpe_replay.train_bpe(text, size, specials, **switch).merges
        same = [c for c, m in runs.items() if m == merges]
        assert not same, f"{cause}: the same merges as {same[0] or 'the rule'}"
        runs[cause] = merges


@pytest.mark.parametrize("cause", list(bpe_replay.KNOWN_BUGS), ids=lambda c: c[:50])
def test_a_training_switch_gets_exactly_its_cause(cause, tmp_path):
    """A trainer that is the oracle with one switch on fails check_merges on a
    corpus of its own and is told exactly that switch, confirmed on the second input."""
    switch = bpe_replay.KNOWN_BUGS[cause]

    def run_train_bpe(input_path, vocab_size, special_tokens):
        result = bpe_replay.train_bpe(input_path.read_bytes().decode("utf-8"), vocab_size, special_tokens, **switch)
        return result.vocab, result.merges

    text = "the cat sat<|endoftext|>x<|endoftext|>y aaa aaa aaa IT'S IT'S O'Sullivan " * 4
    _vocab, merges = test_train_bpe.train(run_train_bpe, tmp_path, text, 256 + 1 + 12, [EOT])
    check = lambda: test_train_bpe.check_merges(
        merges, text, 256 + 1 + 12, [EOT], "r", run_train_bpe=run_train_bpe, corpus_dir=tmp_path
    )
    assert failure_causes(check) == [cause]


class _CutSpecialAsText(_Switched):
    """encode_iterable encodes a special token cut by a chunk boundary as text
    (the switch's replay, over the oracle's encode), exactly otherwise."""

    def __init__(self, vocab, merges, specials):
        super().__init__(vocab, merges, specials)
        self.specials = list(specials or ())

    def encode_iterable(self, iterable):
        chunks = list(iterable)
        cut = test_tokenizer_iterable._cut_special_replay(_IMPL, self, chunks, self.specials)
        yield from self.encode("".join(chunks)) if cut is None else cut


_IMPL = types.SimpleNamespace(repeats=types.SimpleNamespace(paused=contextlib.nullcontext))


def test_a_special_token_cut_at_a_chunk_boundary_isnamed():
    """The switch fails on a long chunk ending in half a special token and is
    told exactly its cause, confirmed on the second cut stream; encoding each
    chunk on its own differs from it there, so the two are told apart."""
    vocab, merges = slow_trained_vocab()
    tok = _CutSpecialAsText(vocab, merges, [EOT])
    chunks = [test_tokenizer_iterable.long_prefix("<|endof"), "text|", ">x"]
    check = lambda: test_tokenizer_iterable.assert_iterable_equals_encode(_IMPL, tok, chunks, rule="r", specials=(EOT,))
    assert failure_causes(check) == [test_tokenizer_iterable._CUT_SPECIAL]
    second = test_tokenizer_iterable.second_cut_stream()
    per_chunk = [i for c in second for i in tok.encode(c)]
    assert per_chunk != test_tokenizer_iterable._cut_special_replay(_IMPL, tok, second, [EOT])
