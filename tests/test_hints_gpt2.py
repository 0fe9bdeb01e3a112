"""The gpt2 profile's known bugs (conformance/gpt2/known_bugs.py) and the
second inputs its tests confirm them on: one input can look like several
bugs; each test's second inputs tell its item's bugs apart."""

import itertools
import re

import pytest
import torch

from lmspec.conformance.asserts import assert_equal, describe_mismatch
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.gpt2 import test_attention, test_data, test_generation, test_layers, test_loss, test_model
from lmspec.conformance.gpt2.checks import assert_equal_explained
from lmspec.conformance.gpt2.known_bugs import KNOWN_BUGS
from lmspec.conformance.tolerances import Tolerance

NO_MASK = "no causal mask (every position sees the future)"
DIAGONAL_2 = "mask diagonal off by one: triu(diagonal=2) lets each position see the next one"


def test_two_tokens_cannot_tell_no_mask_from_diagonal_2():
    """On two tokens, no mask and triu(diagonal=2) mask nothing: both replays
    give the same output, so a failure there alone cannot name either."""
    case = sg.fixed_mha(0, 8, 8, 2, 8, 2, 1, False)
    bugs = KNOWN_BUGS.causes("gpt2.mha")
    both = [bugs[c](case.x, case.weights, case.heads) for c in (NO_MASK, DIAGONAL_2)]
    assert describe_mismatch(both[0], both[1], Tolerance(1e-12, 1e-12)) is None


def test_one_sampling_run_can_look_like_two_generate_bugs():
    """Six sampled ids (seed 1, temperature 1.5, top_k 5) come out the same
    with top-k keeping k−1 ids and with the temperature unused, and differ
    from the right ones: that input alone cannot tell which bug it is."""
    c, w, idx = test_generation._sampling_case(1)
    bugs = KNOWN_BUGS.causes("gpt2.generate")
    args = (idx[0].tolist(), 6, w, c, 1.5, 5, None, 1)
    k_minus_one = bugs["top-k keeps k−1 ids (off by one)"](*args)
    assert k_minus_one == bugs["logits not divided by the temperature"](*args)
    assert k_minus_one != [o.generate(*args[:4], temperature=1.5, top_k=5, eos_id=None, seed=1)]


def _differ(a, b, tol: Tolerance | None) -> bool:
    if tol is not None:
        return describe_mismatch(a, b, tol) is not None
    try:
        assert_equal(a, b, rule="")
    except AssertionError:
        return True
    return False


def _second_inputs(fixtures_dir):
    """(test, item, replay inputs, oracle output, tolerance) per second input."""
    for case in test_attention.SECOND_SQUARE + test_attention.SECOND_D_IN_D_OUT:
        args = (case.x, case.weights, case.heads)
        yield "mha", "gpt2.mha", args, o.mha(*args), test_attention.TOL
        eval_args = (*args, test_attention.DROPOUT, test_attention.SEED)
        yield "mha, dropout in eval", "gpt2.mha/eval", eval_args, o.mha(*args), test_attention.TOL
    for x, w in test_layers.SECOND_LN:
        yield "layernorm", "gpt2.layernorm", (x, w), o.layernorm(x, w), test_layers.TOL
    for x, w in test_layers.SECOND_SMALL:  # near-constant rows (STRICT): the epsilon's placement shows
        for item in ("gpt2.layernorm", "gpt2.layernorm/eps"):
            yield "layernorm near-constant", item, (x, w), o.layernorm(x, w), test_layers.TOL
    for x in test_layers.SECOND_GELU:
        yield "gelu", "gpt2.gelu", (x,), o.gelu(x), test_layers.GELU_TOL
    for x, w in test_layers.SECOND_FF:
        yield "feedforward", "gpt2.feedforward", (x, w), o.feedforward(x, w), Tolerance(5e-5, 5e-5)
    for case in test_model.SECOND_MODELS:
        args = (case.ids, case.weights, case.cfg)
        yield "model", "gpt2.model", args, o.model(*args), test_model.TOL
        yield "model, dropout in eval", "gpt2.model/eval", (*args, test_model.SEED), o.model(*args), test_model.TOL
    for seed, n, num in test_loss.SECOND_LOADERS:
        scored = test_loss._setup(seed, n, seed + 1)[-1]
        yield "loss loader", "gpt2.loss", (scored, num), o.loader_loss(scored, num), test_loss.TOL
    ids = test_data._ids(o.gpt2_encoding(fixtures_dir / "gpt2_vocab.json"))
    for length, stride in test_data.SECOND_WINDOWS:
        yield "dataset", "gpt2.dataset", (ids, length, stride), o.windows(ids, length, stride), None
    for seed, batch, prompt, new, crop in test_generation.SECOND_SIMPLE:
        c, w, g = test_generation._setup(seed)
        rows = torch.randint(0, c["vocab_size"], (batch, prompt), generator=g).tolist()
        expected = [o.greedy(r, new, w, c, crop) for r in rows]
        yield "generate_simple", "gpt2.generate_simple", (rows, new, w, c, crop), expected, None
    for seed, temperature, top_k in test_generation.SECOND_SAMPLES:
        c, w, idx = test_generation._sampling_case(seed)
        sampling = {"temperature": temperature, "top_k": top_k, "eos_id": None, "seed": seed}
        args = (idx[0].tolist(), 6, w, c, *sampling.values())
        yield "generate sampling", "gpt2.generate", args, [o.generate(*args[:4], **sampling)], None


def test_second_inputs_tell_the_known_bugs_apart(fixtures_dir):
    """On each second input, every known bug of the item gives an output of
    its own: neither the oracle's nor another bug's (beyond the test's
    tolerance), so the second input confirms only the bug that was replayed.
    (The eos bug is not among the sampling test's: it is the eos test's.)"""
    for test, item, args, expected, tol in _second_inputs(fixtures_dir):
        outputs = {"the oracle": expected}
        outputs |= {c: replay() for c, replay in KNOWN_BUGS.thunks(item, *args) if "eos" not in c}
        same = [(a, b) for a, b in itertools.combinations(outputs, 2) if not _differ(outputs[a], outputs[b], tol)]
        assert not same, f"{test}: a second input where these give the same output: {same}"


def test_sampling_second_inputs_tell_the_known_bugs_apart():
    """On the distribution test's second inputs, the right distribution and
    each known bug's differ by more than that test can miss: 800 draws from
    any one of them fail the others' check (seeded here; the check's budget)."""
    from lmspec.conformance import stats

    for seed, temperature, top_k in test_generation.SECOND_DRAWS.values():
        c, w, idx = test_generation._sampling_case(seed)
        logits = o.next_logits(idx[0].tolist(), w, c)
        dists = {"the oracle": o.sampling_probs(logits, temperature, top_k)}
        dists |= {c: replay() for c, replay in KNOWN_BUGS.thunks("gpt2.generate/draws", logits, temperature, top_k)}
        for a, p in dists.items():
            draws = torch.multinomial(p.float(), test_generation.DRAWS, replacement=True, generator=sg.generator(0))
            counts = torch.bincount(draws, minlength=len(p)).tolist()
            for b, q in dists.items():
                fits = stats.check_distribution(counts, q.tolist(), budget=test_generation.CASE_BUDGET) is None
                assert fits == (a == b), f"top_k {top_k}, T {temperature}: draws of {a} fit {b}: {fits}"


def test_load_weights_second_inputs_tell_the_orders_apart():
    """Every wrong query/key/value order and the untransposed matrices give
    other logits on the load test's second inputs."""
    from lmspec.conformance.gpt2 import test_load_weights as tl

    params = o.export_checkpoint(o.hf_gpt2(tl.CFG, seed=0))
    for ids in tl.SECOND_IDS:
        outputs = {"the oracle": o.model(ids, o.book_weights_from_checkpoint(params, tl.CFG), tl.CFG)}
        outputs |= {c: replay() for c, replay in KNOWN_BUGS.thunks("gpt2.load_weights", ids, params, tl.CFG)}
        same = [(a, b) for a, b in itertools.combinations(outputs, 2) if not _differ(outputs[a], outputs[b], tl.TOL)]
        assert not same, same


def test_exact_outputs_name_a_cause_only_when_the_second_input_confirms_it():
    """assert_equal_explained names a replayed cause only when the second
    input reproduces it too; it needs the second input whenever it has hints."""
    hints = [("off by one", lambda: [1, 2])]
    with pytest.raises(AssertionError, match="likely cause: off by one"):
        assert_equal_explained([1, 2], [1], rule="r", hints=hints, again=lambda: ([3], [("off by one", lambda: [3])]))
    with pytest.raises(AssertionError) as caught:
        assert_equal_explained([1, 2], [1], rule="r", hints=hints, again=lambda: ([3], [("off by one", lambda: [4])]))
    assert "likely cause" not in str(caught.value)
    with pytest.raises(TypeError, match="again="):
        assert_equal_explained([1, 2], [1], rule="r", hints=hints)


def test_a_replay_that_gives_nan_where_the_bug_does_is_named():
    """triu(diagonal=0) with -inf leaves the first row nothing to attend to:
    NaN there, in the replay as in the book's code; the cause is named."""
    from lmspec.conformance.asserts import assert_close

    diagonal_0 = KNOWN_BUGS.causes("gpt2.mha")[
        "mask diagonal off by one: triu(diagonal=0) hides each position from itself"
    ]
    first, second = sg.fixed_mha(1, 8, 8, 2, 8, 4, 1, False), sg.fixed_mha(2, 8, 8, 2, 8, 6, 1, False)

    def observed(case):
        out = diagonal_0(case.x, case.weights, case.heads).float()
        return out, KNOWN_BUGS.thunks("gpt2.mha", case.x, case.weights, case.heads)

    out, bugs = observed(first)
    assert bool(out[:, 0].isnan().all()) and not bool(out[:, 1:].isnan().any())
    with pytest.raises(AssertionError, match=re.escape("likely cause: mask diagonal off by one: triu(diagonal=0)")):
        assert_close(
            out,
            o.mha(first.x, first.weights, 2),
            test_attention.TOL,
            rule="r",
            hints=bugs,
            again=lambda: observed(second),
        )


def test_a_refused_end_of_text_is_put_down_to_allowed_special(fixtures_dir):
    """A dataset that encodes without allowed_special raises tiktoken's refusal
    on both texts holding <|endoftext|>, as the replay does: that cause, and
    no other; a dataset that raises something else is told none."""
    from lmspec.conformance.hints import named_causes

    encoding = o.gpt2_encoding(fixtures_dir / "gpt2_vocab.json")

    def refusing(txt, max_length, stride):
        ids = encoding.encode(txt)  # the switch: no allowed_special
        return {"inputs": [ids[:max_length]], "targets": [ids[1 : max_length + 1]]}

    def failing(txt, max_length, stride):
        raise ValueError("the windows could not be made")

    messages = []
    for run in (refusing, failing):
        with pytest.raises(AssertionError) as failure:
            test_data.test_dataset_encodes_end_of_text(run, encoding)
        messages.append(str(failure.value))
    assert named_causes(messages[0]) == [test_data.NOT_ALLOWED]
    assert named_causes(messages[1]) == []
