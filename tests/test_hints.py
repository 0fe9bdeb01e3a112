"""Self-tests of the hint rule (conformance/hints.py): a likely cause is named
only when replaying its bug reproduces the observed output on the failing
input AND on a second input of the same test (issue 19: a trainer that cuts
its file into byte ranges was told "the stopping test is off by one")."""

import pytest

from lmspec.conformance import hints
from lmspec.conformance.cs336.oracles import bpe_replay
from lmspec.conformance.cs336.oracles.tokenizer import sample_training_text
from lmspec.conformance.cs336.oracles.training import KNOWN_BUGS, cosine_lr

_CUT = "\x00<|cut|>\x00"
OFF_BY_ONE = "the stopping test is off by one (one merge too few)"


def _byte_range_trainer(text: str, vocab_size: int) -> list:
    """The real bug: no special tokens, so the file is cut into 4 byte ranges
    and a pre-token straddling a cut is counted as two."""
    data = text.encode("utf-8")
    step = max(1, len(data) // 4)
    ranges = [data[i : i + step] for i in range(0, len(data), step)]
    cut = _CUT.join(r.decode("utf-8", errors="ignore") for r in ranges)
    return bpe_replay.train_bpe(cut, vocab_size + 1, [_CUT]).merges


def _off_by_one_trainer(text: str, vocab_size: int) -> list:
    return bpe_replay.train_bpe(text, vocab_size - 1).merges


def _causes(trainer, text: str, vocab_size: int) -> list[str]:
    mismatch = bpe_replay.merge_mismatch(trainer(text, vocab_size), text, vocab_size, [])
    return [] if mismatch is None else mismatch.causes


SECOND = (sample_training_text()[:3000], 256 + 24)  # test_train_bpe.SECOND_INPUT_*


def test_one_input_can_look_like_the_wrong_bug():
    """On this small corpus the byte-range trainer's merges are exactly one
    short: the stopping test's replay reproduces them."""
    assert _causes(_byte_range_trainer, "\nb!\né!1'ébs", 259) == [OFF_BY_ONE]


def test_the_second_input_keeps_the_wrong_cause_silent():
    first = _causes(_byte_range_trainer, "\nb!\né!1'ébs", 259)
    assert hints.confirmed(first, lambda: _causes(_byte_range_trainer, *SECOND)) == []


def test_the_second_input_confirms_the_real_cause():
    first = _causes(_off_by_one_trainer, "ab ab ab cd cd ef ab", 261)
    assert first == [OFF_BY_ONE]
    assert hints.confirmed(first, lambda: _causes(_off_by_one_trainer, *SECOND)) == [OFF_BY_ONE]


def test_a_second_input_that_fails_otherwise_confirms_nothing():
    def crashes() -> list[str]:
        raise ValueError("the implementation raised there")

    assert hints.confirmed(["x"], crashes) == []
    assert hints.confirmed([], crashes) == []


def test_registry_keeps_an_items_bugs_beside_its_oracle():
    """The §3 known bugs are registered in oracles/training.py, replayable
    with the oracle's inputs; a cause registered twice is refused."""
    schedule = KNOWN_BUGS.causes("3.cosine_schedule")
    assert "warmup off by one: α_max·(t+1)/T_w" in schedule
    replay = schedule["warmup off by one: α_max·(t+1)/T_w"]
    assert replay(0, 1.0, 0.1, 7, 21) == pytest.approx(1 / 7) != cosine_lr(0, 1.0, 0.1, 7, 21)
    clipping = KNOWN_BUGS.causes("3.gradient_clipping")
    assert any("inside the square root" in c for c in clipping), clipping
    registry = hints.KnownBugs()
    registry.add("1.x", "a cause", lambda: 0)
    with pytest.raises(ValueError, match="registered twice"):
        registry.add("1.x", "a cause", lambda: 1)
    assert [cause for cause, _ in registry.thunks("1.x")] == ["a cause"]


def _apostrophe_oracle():
    from lmspec.conformance.cs336.oracles.tokenizer import EncodeOracle

    merges = [(b"'", b"S"), (b"'", b"T"), (b"'", b"s")]
    vocab = {i: bytes([i]) for i in range(256)} | {256 + k: a + b for k, (a, b) in enumerate(merges)}
    return EncodeOracle(vocab, merges, ())


def test_encode_names_ignorecase_only_when_the_second_input_reproduces_it():
    """assert_encodes names re.IGNORECASE when the case-insensitive pattern
    gives the ids on the failing text and on the second text; an encode that
    is right on the second text gets no cause."""
    from lmspec.conformance.cs336.oracles.tokenizer import assert_encodes, buggy_pieces

    oracle = _apostrophe_oracle()

    def caseless(text: str) -> list[int]:
        return [oracle.inverse[p] for p in buggy_pieces(oracle, text, "ignorecase")]

    text = "O'Sullivan"
    with pytest.raises(AssertionError, match="IGNORECASE") as caught:
        assert_encodes(oracle, caseless(text), text, rule="r", encode=caseless)
    assert "likely cause" in str(caught.value)
    with pytest.raises(AssertionError) as caught:
        assert_encodes(oracle, caseless(text), text, rule="r", encode=oracle.encode)
    assert "likely cause" not in str(caught.value)
