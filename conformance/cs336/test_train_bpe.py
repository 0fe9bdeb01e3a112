"""SPEC §1.1 (pre-tokenization, as seen by training) and §1.2 (BPE training).

Oracle: conformance/cs336/oracles/bpe_replay.py, a trainer that recounts every pair at every
merge and takes the max by (count, pair). Corpora are generated over a small
alphabet so ties are common. The official corpus.en output is the exact
oracle when shared/fixtures is present.
"""

import itertools
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import example, given

from lmspec.conformance import hints
from lmspec.conformance.asserts import assert_equal
from lmspec.conformance.cs336.oracles import bpe_replay
from lmspec.conformance.cs336.oracles.tokenizer import EOT, official_corpus_en_output, sample_training_text
from lmspec.conformance.cs336.strategies.tokenizer import BpeCorpus, bpe_corpora

#: Official bound for corpus.en at vocab 500 (CS336 test_train_bpe_speed);
#: the reference trainer takes about a third of it on one core.
OFFICIAL_SPEED_BOUND_S = 1.5

_counter = itertools.count()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bpe_corpora")


def train(run_train_bpe, folder: Path, text: str, vocab_size: int, special_tokens: Sequence[str]):
    """Write ``text`` as UTF-8 (a fresh file per call) and train on it; the path is
    passed as a ``Path``, as the official CS336 tests do."""
    path = folder / f"corpus_{next(_counter)}.txt"
    path.write_bytes(text.encode("utf-8"))
    vocab, merges = run_train_bpe(input_path=path, vocab_size=vocab_size, special_tokens=list(special_tokens))
    return dict(vocab), list(merges)


#: The second input of every training test, on which a likely cause must be
#: confirmed before it is shown (a trainer whose bug is elsewhere is never
#: told "the stopping test is off by one" because one corpus happened to
#: look so): :func:`second_input_text`, the failing input's special tokens,
#: SECOND_INPUT_MERGES merges (fewer than its pairs allow, so the stopping
#: test is exercised).
SECOND_INPUT_CHARS = 3000
SECOND_INPUT_MERGES = 24
#: How often the second input's tail repeats: enough for its pairs to be
#: among the first SECOND_INPUT_MERGES merges.
SECOND_INPUT_REPEATS = 30


def second_input_text(special_tokens: Sequence[str]) -> str:
    """The built-in sample text's first SECOND_INPUT_CHARS characters, then a
    tail on which every known bug of bpe_replay.KNOWN_BUGS gives other merges
    than the rule: "aaa" (a merge applied left to right or right to left),
    "IT'S" (an upper-case contraction), "x" and "y" around each special token
    (split on it, deleted, or counted as text)."""
    tail = " aaa aaa IT'S" + "".join(f" x{s}y" for s in special_tokens)
    return sample_training_text()[:SECOND_INPUT_CHARS] + tail * SECOND_INPUT_REPEATS


_SECOND_CAUSES: dict[tuple, list[str] | None] = {}


def check_merges(
    merges,
    text: str,
    vocab_size: int,
    special_tokens: Sequence[str],
    rule: str,
    *,
    run_train_bpe,
    corpus_dir: Path,
    expected: Sequence[tuple[bytes, bytes]] | None = None,
) -> None:
    """The merges equal the slow oracle's (``expected``, when known already); else the first
    difference, and the likely causes that replaying them reproduces on this input AND on
    the test's second input (:data:`SECOND_INPUT_CHARS`)."""
    __tracebackhide__ = True
    mismatch = bpe_replay.merge_mismatch(merges, text, vocab_size, special_tokens, expected=expected)
    if mismatch is None:
        return

    def second_input_causes() -> list[str]:
        # Once per trainer and special tokens: Hypothesis calls a failing test again while it shrinks.
        key = (id(getattr(run_train_bpe, "__wrapped__", run_train_bpe)), tuple(special_tokens))
        if key not in _SECOND_CAUSES:
            second_text = second_input_text(special_tokens)
            second_size = 256 + len(special_tokens) + SECOND_INPUT_MERGES
            try:
                _, second_merges = train(run_train_bpe, corpus_dir, second_text, second_size, special_tokens)
                second = bpe_replay.merge_mismatch(second_merges, second_text, second_size, special_tokens)
                _SECOND_CAUSES[key] = [] if second is None else second.causes
            except Exception:
                _SECOND_CAUSES[key] = None
        causes = _SECOND_CAUSES[key]
        if causes is None:
            raise RuntimeError("the implementation fails on the second input")
        return causes

    confirmed = hints.confirmed(mismatch.causes, second_input_causes)
    raise AssertionError(
        f"{rule}: {mismatch.text(confirmed)}\n  input: vocab_size={vocab_size}, "
        f"special_tokens={list(special_tokens)}, "
        f"corpus={text[:300]!r}{'...' if len(text) > 300 else ''}"
    )


def _again(run_train_bpe, corpus_dir: Path) -> dict:
    """What check_merges needs to train the implementation on the second input."""
    return {"run_train_bpe": run_train_bpe, "corpus_dir": corpus_dir}


def check_vocab(
    vocab: dict, merges: list, special_tokens: Sequence[str], *, run_train_bpe=None, corpus_dir: Path | None = None
) -> None:
    """Ids exactly 0..len-1; values exactly the 256 bytes, the specials and one
    token per merge, whatever id each got (specials first or last, merged tokens
    in any order): the official test compares these sets and nothing more. A
    likely cause (bpe_replay.VOCAB_BUGS) is named when its replay gives the
    values here and on the second input (:func:`_second_vocab_causes`)."""
    __tracebackhide__ = True
    rule = "SPEC 1.2: vocab ids are 0..len-1 and its values the 256 bytes, the specials and the merged tokens"
    n = len(vocab)
    ids = sorted(vocab)
    if ids != list(range(n)):
        extra = [i for i in ids if not (isinstance(i, int) and 0 <= i < n)][:5]
        raise AssertionError(f"{rule}: {n} ids, but not 0..{n - 1}: unexpected ids {extra}")
    expected = [bytes([b]) for b in range(256)] + [s.encode("utf-8") for s in special_tokens]
    expected += [a + b for a, b in merges]
    got_values, want_values = set(vocab.values()), set(expected)
    if got_values != want_values:
        missing = sorted(want_values - got_values, key=lambda v: (len(v), v))
        unexpected = sorted(got_values - want_values, key=lambda v: (len(v), v))
        causes = []
        if run_train_bpe is not None and corpus_dir is not None:
            causes = hints.confirmed(
                bpe_replay.vocab_causes(vocab, merges, special_tokens),
                lambda: _second_vocab_causes(run_train_bpe, corpus_dir, special_tokens),
            )
        raise AssertionError(
            f"{rule}: missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''} "
            f"(special tokens {list(special_tokens)}, {len(merges)} merges){hints.likely_causes(causes)}"
        )
    # Two merges can make the same bytes; the official test compares sets, so
    # one entry for them or one per merge are both accepted.
    if n not in (len(expected), len(want_values)):
        raise AssertionError(
            f"{rule}: {n} entries, expected 256 + {len(special_tokens)} specials + {len(merges)} merges "
            f"= {len(expected)} (values repeat: {n - len(got_values)} duplicates)"
        )


def _second_vocab_causes(run_train_bpe, corpus_dir: Path, special_tokens: Sequence[str]) -> list[str]:
    """The vocab bugs the second input reproduces: the implementation trained on
    :func:`second_input_text` with two special tokens
    other than the failing input's (so a bug of the special tokens shows)."""
    specials = [s for s in ("<|endoftext|>", "<|pad|>", "<|sep|>") if s not in special_tokens][:2]
    size = 256 + len(specials) + SECOND_INPUT_MERGES
    vocab, merges = train(run_train_bpe, corpus_dir, second_input_text(specials), size, specials)
    return bpe_replay.vocab_causes(vocab, merges, specials)


@pytest.mark.spec("1.2.train_bpe")
@given(corpus=bpe_corpora())
@example(corpus=BpeCorpus("ab ba", 257, []))  # one three-way tie: (b"b", b"a") wins
@example(corpus=BpeCorpus("aaaa aaa<|endoftext|>aa", 262, [EOT]))  # overlapping pairs
@example(corpus=BpeCorpus("ab<|pad|>ab<|endoftext|><|pad|>ba cab", 266, ["<|endoftext|>", "<|pad|>"]))
def test_train_bpe_matches_slow_oracle(run_train_bpe, corpus_dir, corpus: BpeCorpus):
    """Merges equal an obviously-correct trainer's exactly: most frequent pair
    within pre-tokens, ties to the greater pair, specials split off first."""
    vocab, merges = train(run_train_bpe, corpus_dir, *corpus)
    check_merges(merges, *corpus, rule="SPEC 1.2: merges of train_bpe", **_again(run_train_bpe, corpus_dir))
    check_vocab(vocab, merges, corpus.special_tokens, **_again(run_train_bpe, corpus_dir))


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_ties_prefer_greater_pair(run_train_bpe, corpus_dir):
    """Among pairs of equal count the lexicographically greater (a, b) wins."""
    # Pairs (" ", "b"), ("a", "b"), ("b", "a") all occur twice.
    _vocab, merges = train(run_train_bpe, corpus_dir, "ab ba ab ba", 257, [])
    check_merges(
        merges,
        "ab ba ab ba",
        257,
        [],
        rule="SPEC 1.2: ties go to the greater pair",
        **_again(run_train_bpe, corpus_dir),
    )
    assert_equal(merges, [(b"b", b"a")], rule="SPEC 1.2: ties go to the greater pair")


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_reaches_vocab_size_exactly(run_train_bpe, corpus_dir):
    """Merges are added until len(vocab) == vocab_size, which counts the 256
    bytes, the special tokens and the merges."""
    text = "the cat sat on the mat<|endoftext|>the hat<|endoftext|>" * 3
    for vocab_size in (257, 258, 270):
        vocab, merges = train(run_train_bpe, corpus_dir, text, vocab_size, [EOT])
        assert_equal(
            len(vocab),
            vocab_size,
            rule="SPEC 1.2: len(vocab) == vocab_size",
            context=f"vocab_size={vocab_size}",
        )
        check_merges(
            merges, text, vocab_size, [EOT], rule="SPEC 1.2: merges of train_bpe", **_again(run_train_bpe, corpus_dir)
        )


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_stops_when_no_pair_is_left(run_train_bpe, corpus_dir):
    """With every pre-token merged into one token, training stops early."""
    text = "ab ab c! d\n"  # pre-tokens "ab", " ab", " c", "!", " d", "\n": 4 merges at most
    vocab, merges = train(run_train_bpe, corpus_dir, text, 400, [])
    check_merges(
        merges, text, 400, [], rule="SPEC 1.2: training stops when no pair is left", **_again(run_train_bpe, corpus_dir)
    )
    check_vocab(vocab, merges, [], **_again(run_train_bpe, corpus_dir))


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_special_tokens_not_in_pair_counts(run_train_bpe, corpus_dir):
    """Special tokens never take part in pair counts: no merge touches their bytes."""
    text = "<|endoftext|>ab<|endoftext|><|endoftext|>ba<|endoftext|>" * 5
    vocab, merges = train(run_train_bpe, corpus_dir, text, 300, [EOT])
    bad = [m for m in merges if any(ch in m[0] + m[1] for ch in (b"<", b"|", b">", b"e", b"o"))]
    assert not bad, f"SPEC 1.2: special tokens must not be counted, yet merges {bad[:5]} use their bytes"
    check_merges(
        merges,
        text,
        300,
        [EOT],
        rule="SPEC 1.2: special tokens never take part in pair counts",
        **_again(run_train_bpe, corpus_dir),
    )
    check_vocab(vocab, merges, [EOT], **_again(run_train_bpe, corpus_dir))


@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_never_merges_across_special_tokens(run_train_bpe, corpus_dir):
    """The corpus is split on special tokens: x<|endoftext|>y never yields (x, y)."""
    text = "x<|endoftext|>y<|endoftext|>" * 10
    vocab, merges = train(run_train_bpe, corpus_dir, text, 300, [EOT])
    assert_equal(
        merges,
        [],
        rule="SPEC 1.2: no pair exists inside the pre-tokens 'x' and 'y'",
        context=repr(text[:60]),
    )
    check_vocab(vocab, merges, [EOT], **_again(run_train_bpe, corpus_dir))


@pytest.mark.spec("1.1.pretokenize")
@given(corpus=bpe_corpora(specials=()))
@example(corpus=BpeCorpus("ab!ab!ab! cd cd", 270, []))
@example(corpus=BpeCorpus("x!x!x!x!x!", 260, []))
@example(corpus=BpeCorpus("O'Sullivan IT'S WE'LL I'VE O'Sullivan IT'S WE'LL I'VE DON'T", 275, []))
def test_train_bpe_merges_stay_inside_pretokens(run_train_bpe, corpus_dir, corpus: BpeCorpus):
    """BPE never merges across pre-token boundaries: every merged token occurs
    inside one GPT-2 pre-token of the corpus (the pattern is case-sensitive:
    the upper-case 'S of O'Sullivan is no contraction)."""
    _vocab, merges = train(run_train_bpe, corpus_dir, *corpus)
    pretokens = list(bpe_replay.count_pretokens(corpus.text))
    for a, b in merges:
        if not any(a + b in p for p in pretokens):
            spans = (a + b) in corpus.text.encode("utf-8")
            causes = []
            if spans:
                second = next(c for c in _SECOND_PRETOKEN_CORPORA if c != corpus)
                causes = hints.confirmed(
                    _pretokenize_causes(merges, corpus),
                    lambda s=second: _pretokenize_causes(train(run_train_bpe, corpus_dir, *s)[1], s),
                )
            raise AssertionError(
                f"SPEC 1.1: merge ({a!r}, {b!r}) makes {a + b!r}, which "
                + ("spans a pre-token boundary: pairs are counted inside GPT-2 pre-tokens" if spans else "")
                + ("" if spans else "occurs nowhere in the corpus")
                + f" (pre-tokens: {sorted(pretokens)[:12]})"
                + hints.likely_causes(causes, own_line=True)
                + f"\n  input: {corpus.text!r}"
            )


#: Known pre-tokenization bugs of a trainer (their causes: bpe_replay.KNOWN_BUGS).
_PRETOKENIZE_BUGS = {c: bug for c, bug in bpe_replay.KNOWN_BUGS.items() if bug.keys() & {"ignorecase", "use_pattern"}}
#: The second input of the test above, on which a cause must be confirmed
#: (the other one when the failing corpus is it).
_SECOND_PRETOKEN_CORPORA = (
    BpeCorpus("O'Sullivan IT'S WE'LL I'VE O'Sullivan IT'S WE'LL I'VE DON'T", 275, []),
    BpeCorpus("ab!ab!ab! cd cd it's IT'S", 272, []),
)


def _pretokenize_causes(merges: list, corpus: BpeCorpus) -> list[str]:
    """The known bugs whose replay gives exactly these merges."""
    return [
        cause
        for cause, bug in _PRETOKENIZE_BUGS.items()
        if bpe_replay.train_bpe(corpus.text, corpus.vocab_size, corpus.special_tokens, **bug).merges == list(merges)
    ]


@pytest.fixture(scope="module")
def corpus_en(fixtures_dir: Path) -> tuple[Path, str]:
    path = fixtures_dir / "corpus.en"
    return path, path.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.spec("1.2.train_bpe")
def test_train_bpe_official_corpus_en(run_train_bpe, fixtures_dir, corpus_dir, corpus_en, record_property):
    """corpus.en, vocab 500, ["<|endoftext|>"]: merges equal the official list
    exactly; the sets of vocab ids and of vocab values match."""
    path, text = corpus_en
    start = time.perf_counter()
    vocab, merges = run_train_bpe(input_path=path, vocab_size=500, special_tokens=[EOT])
    seconds = time.perf_counter() - start
    record_property("train_bpe_corpus_en_seconds", round(seconds, 3))
    print(f"train_bpe(corpus.en, 500): {seconds:.3f} s")
    ref_vocab, ref_merges = official_corpus_en_output(fixtures_dir)
    if list(merges) != ref_merges:
        check_merges(
            merges,
            text,
            500,
            [EOT],
            rule="SPEC 1.2: official corpus.en merges",
            expected=ref_merges,
            **_again(run_train_bpe, corpus_dir),
        )
        assert_equal(list(merges), ref_merges, rule="SPEC 1.2: official corpus.en merges")
    assert_equal(sorted(vocab), sorted(ref_vocab), rule="SPEC 1.2: official corpus.en vocab ids")
    got, want = set(vocab.values()), set(ref_vocab.values())
    assert got == want, (
        f"SPEC 1.2: official corpus.en vocab values differ: missing {sorted(want - got)[:5]}, "
        f"unexpected {sorted(got - want)[:5]}"
    )


@pytest.mark.slow
@pytest.mark.spec("1.2.train_bpe.speed")
def test_train_bpe_official_speed(run_train_bpe, corpus_en, record_property):
    """SHOULD be efficient: corpus.en at vocab 500 trains in under 1.5 s (the
    official bound), best of up to 3 runs (the suite shares its cores); a run
    over three times the bound is not noise, and is not repeated."""
    path, _ = corpus_en
    times = []
    for _ in range(3):
        start = time.perf_counter()
        run_train_bpe(input_path=path, vocab_size=500, special_tokens=[EOT])
        times.append(time.perf_counter() - start)
        if times[-1] < OFFICIAL_SPEED_BOUND_S or times[-1] > 3 * OFFICIAL_SPEED_BOUND_S:
            break
    record_property("train_bpe_corpus_en_best_seconds", round(min(times), 3))
    if min(times) < OFFICIAL_SPEED_BOUND_S:
        return
    # Where the time goes: the same run with no merge to make (vocab_size =
    # 256 bytes + 1 special) costs the reading and pre-tokenization alone.
    start = time.perf_counter()
    run_train_bpe(input_path=path, vocab_size=257, special_tokens=[EOT])
    setup = time.perf_counter() - start
    merging = min(times) - setup
    where = (
        f"the merge loop: {merging:.2f} s for 243 merges, after {setup:.2f} s of reading and pre-tokenizing "
        "(index the pair counts and update only the pairs touching the merged one)"
        if merging > setup
        else f"reading and pre-tokenizing: {setup:.2f} s of it with no merge to make"
    )
    raise AssertionError(
        f"SPEC 1.2 (SHOULD): train_bpe(corpus.en, 500) took {min(times):.2f} s at best "
        f"(runs {[round(t, 2) for t in times]}), official bound {OFFICIAL_SPEED_BOUND_S} s\n"
        f"  most of the time goes to {where}"
    )
