"""Self-tests of the hint rule (conformance/hints.py): a likely cause is named
only when replaying its bug reproduces the observed output on the failing
input AND on a second input of the same test (issue 19: a trainer that cuts
its file into byte ranges was told "the stopping test is off by one")."""

import math

import pytest
import torch

from lmspec.conformance import hints
from lmspec.conformance.asserts import assert_close
from lmspec.conformance.cs336 import test_train_bpe
from lmspec.conformance.cs336.oracles import bpe_replay
from lmspec.conformance.cs336.oracles.training import KNOWN_BUGS, cosine_lr
from lmspec.conformance.tolerances import EXACT

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


SECOND = (test_train_bpe.second_input_text([]), 256 + test_train_bpe.SECOND_INPUT_MERGES)


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


# --- assert_close: every hint of the suite goes through it -------------------------------------
def _fail_message(actual, expected, hint_list, again) -> str:
    with pytest.raises(AssertionError) as failure:
        assert_close(actual, expected, EXACT, rule="r", hints=hint_list, again=again)
    return str(failure.value)


def _doubled(x: torch.Tensor) -> list:
    return [("doubled", lambda: 2 * x), ("negated", lambda: -x)]


def test_a_cause_is_named_when_its_replay_reproduces_both_inputs():
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0])
    message = _fail_message(2 * x, x, _doubled(x), lambda: (2 * y, _doubled(y)))
    assert "likely cause: doubled" in message and "negated" not in message


def test_several_confirmed_causes_are_one_ambiguous_finding():
    """Two bugs that give the same outputs on both inputs: one finding, 'A; or equally: B', never two certainties."""
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0])

    def alike(t: torch.Tensor) -> list:
        return [("doubled", lambda: 2 * t), ("added to itself", lambda: t + t)]

    message = _fail_message(2 * x, x, alike(x), lambda: (2 * y, alike(y)))
    assert message.splitlines()[0].endswith("; likely cause: doubled; or equally: added to itself"), message
    assert hints.named_causes(message) == ["doubled", "added to itself"]


def test_hints_off_in_the_judges_environment_names_nothing(monkeypatch):
    """LMSPEC_HINTS=off (tools/bench/hints.py, what hints cost) leaves the failure without a cause."""
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0])
    monkeypatch.setenv("LMSPEC_HINTS", "off")
    message = _fail_message(2 * x, x, _doubled(x), lambda: (2 * y, _doubled(y)))
    assert message.startswith("r: ") and "likely cause" not in message


def test_a_cause_the_second_input_does_not_reproduce_is_not_named():
    """On x = [0, 0] doubling and negating give the same wrong output: the
    second input tells them apart, and neither matches an implementation
    that adds one there."""
    x, y = torch.tensor([0.0, 0.0]), torch.tensor([3.0, -1.0])
    assert "likely cause" not in _fail_message(x.clone(), x - 1, _doubled(x), lambda: (y + 1, _doubled(y)))
    message = _fail_message(-x + 0.0, x + 1, _doubled(x), lambda: (-y, _doubled(y)))
    assert "likely cause: negated" in message and "doubled" not in message


def test_a_second_input_that_raises_names_nothing():
    x = torch.tensor([1.0, 2.0])

    def again():
        raise RuntimeError("the implementation failed on the second input")

    assert "likely cause" not in _fail_message(2 * x, x, _doubled(x), again)


def test_a_second_input_ended_by_a_guard_names_nothing_and_keeps_the_failure():
    """A guard that ends a call on the second input (the repeated-failure
    limit, a skip) must not replace the failing input's message."""
    x = torch.tensor([1.0, 2.0])

    def again():
        pytest.fail("the same failure on 5 inputs of this test", pytrace=False)

    message = _fail_message(2 * x, x, _doubled(x), again)
    assert message.startswith("r: ") and "likely cause" not in message


def test_hints_without_a_second_input_are_a_suite_bug():
    x = torch.tensor([1.0])
    with pytest.raises(TypeError, match="again="):
        assert_close(x, x, EXACT, rule="r", hints=_doubled(x))


def test_an_overflowing_replay_matches_only_the_same_overflow():
    """rtol·|inf| is inf: an infinite replay must not 'reproduce' every finite output."""
    inf = [("overflow", lambda: torch.tensor([math.inf]))]
    again = lambda: (torch.tensor([math.inf]), inf)
    assert "likely cause" not in _fail_message(torch.tensor([1e4]), torch.tensor([1.0]), inf, again)
    assert "likely cause: overflow" in _fail_message(torch.tensor([math.inf]), torch.tensor([1.0]), inf, again)


def test_the_second_input_is_never_the_failing_one():
    a, b = torch.zeros(2), torch.ones(2)
    assert hints.other((a, 1), (a.clone(), 1), (b, 1))[0] is b
    assert hints.other(0.5, 0.875, 0.76) == 0.875
    assert hints.other(0.875, 0.875, 0.76) == 0.76


def _registries():
    """Every ``KNOWN_BUGS`` registry of the suite, with its profile (the
    package under conformance/ it lives in)."""
    import importlib
    import pkgutil

    import lmspec.conformance as suite
    from lmspec.conformance.profiles import NAMES

    for profile in NAMES:
        package = importlib.import_module(f"{suite.__name__}.{profile}")
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if info.name.rsplit(".", 1)[-1].startswith("test_"):
                continue
            registry = getattr(importlib.import_module(info.name), "KNOWN_BUGS", None)
            if isinstance(registry, hints.KnownBugs):
                yield profile, info.name, registry


def test_every_known_bug_belongs_to_an_item_of_its_profile():
    """A registry key is an item id of the profile, or ``item/part`` where an
    item's tests check several functions (4.generation/top_p)."""
    from lmspec.conformance.profiles import get

    found = list(_registries())
    assert {profile for profile, _, _ in found} >= {"cs336"}, found
    for profile, module, registry in found:
        ids = {item.id for item in get(profile).items}
        strangers = {bug.item for bug in registry if bug.item.split("/")[0] not in ids}
        assert not strangers, f"{module}: known bugs of no {profile} item: {sorted(strangers)}"
