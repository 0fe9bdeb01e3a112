"""SPEC §6.1 generate_text_simple and generate, against greedy and sampled
decoding replayed on the float64 oracle model (batch of one for ``generate``,
as the book's version is written)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmspec.conformance.asserts import assert_equal
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.gpt2.checks import assert_equal_explained
from lmspec.conformance.gpt2.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import other

strict = pytest.mark.strict


def _setup(seed: int, context: int = 8, vocab: int = 40):
    c = o.cfg(vocab=vocab, context=context, emb=16, heads=2, layers=1, drop=0.1)
    g = sg.generator(seed)
    w = o.model_weights(g, c)
    w["out_head.weight"] = w["out_head.weight"] * 6.0  # clear argmax margins
    return c, w, g


#: Second inputs (conformance/hints.py): (seed, batch, prompt, new ids,
#: context_size) whose rows outgrow context_size, so the first ids and the
#: last ones differ.
SECOND_SIMPLE = ((3, 2, 5, 4, 3), (4, 1, 4, 6, 2))


def _observed_simple(run, case):
    """generate_text_simple on (seed, batch, prompt, new, crop) and the known bugs' replays there."""
    seed, batch, prompt, new, crop = case
    c, w, g = _setup(seed)
    idx = torch.randint(0, c["vocab_size"], (batch, prompt), generator=g)
    out = run(cfg=c, weights=w, idx=idx, max_new_tokens=new, context_size=crop)
    return out, KNOWN_BUGS.thunks("gpt2.generate_simple", idx.tolist(), new, w, c, crop)


@sg.budget(6)
@pytest.mark.spec("gpt2.generate_simple")
@given(seed=sg.seeds, batch=st.integers(1, 3), prompt=st.integers(1, 5), new=st.integers(1, 8), crop=st.integers(2, 8))
def test_generate_text_simple_is_greedy(gpt2_generate_simple, seed, batch, prompt, new, crop):
    """The last ``context_size`` ids go in, the argmax of the last position is appended, ``max_new_tokens`` times."""
    c, w, g = _setup(seed)
    idx = torch.randint(0, c["vocab_size"], (batch, prompt), generator=g)
    case = (seed, batch, prompt, new, crop)
    out, bugs = _observed_simple(gpt2_generate_simple, case)
    second = other(case, *SECOND_SIMPLE)
    assert_equal_explained(
        out,
        [o.greedy(row.tolist(), new, w, c, crop) for row in idx],
        rule="greedy generation over the last context_size ids",
        hints=bugs,
        again=lambda: _observed_simple(gpt2_generate_simple, second),
        context=f"prompt {idx.tolist()}, context_size {crop}",
    )


def _observed(run, c, w, idx, steps, *, temperature=0.0, top_k=None, eos_id=None, seed=0):
    """``generate`` on one prompt and the known bugs' replays there."""
    args = {"temperature": temperature, "top_k": top_k, "eos_id": eos_id, "seed": seed}
    out = run(cfg=c, weights=w, idx=idx, max_new_tokens=steps, context_size=c["context_length"], **args)
    return out, KNOWN_BUGS.thunks("gpt2.generate", idx[0].tolist(), steps, w, c, **args)


@sg.budget(5)
@pytest.mark.spec("gpt2.generate")
@given(seed=sg.seeds, prompt=st.integers(1, 4), new=st.integers(1, 6))
def test_generate_temperature_zero_is_argmax(gpt2_generate, seed, prompt, new):
    """``temperature = 0``: argmax, with and without top-k (k ≥ 1 keeps the argmax)."""
    c, w, g = _setup(seed)
    idx = torch.randint(0, c["vocab_size"], (1, prompt), generator=g)
    expected = o.greedy(idx[0].tolist(), new, w, c, c["context_length"])
    for top_k in (None, 3):
        out = gpt2_generate(
            cfg=c,
            weights=w,
            idx=idx,
            max_new_tokens=new,
            context_size=c["context_length"],
            temperature=0.0,
            top_k=top_k,
        )
        assert_equal(
            out, [expected], rule=f"temperature 0 (top_k {top_k}) is greedy decoding", context=f"prompt {idx.tolist()}"
        )


#: Second inputs: (seed, temperature, top_k) with top_k 2 and a
#: temperature other than 1, where k+1, k−1 and an unused temperature sample
#: other ids.
SECOND_SAMPLES = ((5, 0.7, 2), (4, 1.5, 2))


def _sampling_case(seed: int):
    """The model (a flatter head: sampling matters) and a prompt of 3 ids."""
    c, w, g = _setup(seed)
    w["out_head.weight"] = w["out_head.weight"] / 6.0
    return c, w, torch.randint(0, c["vocab_size"], (1, 3), generator=g)


def _observed_samples(run, case):
    seed, temperature, top_k = case
    c, w, idx = _sampling_case(seed)
    return _observed(run, c, w, idx, 6, temperature=temperature, top_k=top_k, seed=seed)


@sg.budget(8)
@pytest.mark.spec("gpt2.generate")
@given(seed=sg.seeds, temperature=st.sampled_from([0.7, 1.0, 1.5]), top_k=st.sampled_from([None, 2, 5]))
def test_generate_samples_like_the_book(gpt2_generate, seed, temperature, top_k):
    """``temperature > 0``: logits (top-k filtered) divided by the temperature,
    softmax, ``torch.multinomial`` after ``torch.manual_seed(seed)``: the same
    ids as the replay."""
    c, w, idx = _sampling_case(seed)
    case = (seed, temperature, top_k)
    out, bugs = _observed_samples(gpt2_generate, case)
    expected = o.generate(idx[0].tolist(), 6, w, c, temperature=temperature, top_k=top_k, eos_id=None, seed=seed)
    second = other(case, *SECOND_SAMPLES)
    assert_equal_explained(
        out,
        [expected],
        rule="sampling: top-k, /temperature, softmax, torch.multinomial",
        hints=bugs,
        again=lambda: _observed_samples(gpt2_generate, second),
        context=f"seed {seed}, temperature {temperature}, top_k {top_k}",
    )


@sg.budget(5)
@pytest.mark.spec("gpt2.generate")
@given(seed=sg.seeds, k=st.integers(1, 4))
def test_generate_top_k_keeps_the_k_largest(gpt2_generate, seed, k):
    """Every sampled id is among the k largest logits of its step (ties with the k-th kept)."""
    c, w, g = _setup(seed)
    w["out_head.weight"] = w["out_head.weight"] / 6.0
    idx = torch.randint(0, c["vocab_size"], (1, 2), generator=g)
    out = torch.as_tensor(
        gpt2_generate(
            cfg=c,
            weights=w,
            idx=idx,
            max_new_tokens=8,
            context_size=c["context_length"],
            temperature=2.0,
            top_k=k,
            seed=seed,
        )
    )
    ids = out[0].tolist()
    for pos in range(2, len(ids)):
        logits = o.next_logits(ids[:pos], w, c)
        kth = torch.topk(logits, k).values[-1]
        assert logits[ids[pos]] >= kth - 1e-4, (
            f"top_k {k}: step {pos - 2} sampled id {ids[pos]} with logit {float(logits[ids[pos]]):.5g}, "
            f"below the k-th largest {float(kth):.5g} (ids so far {ids[:pos]})"
        )


#: Second inputs: (seed, which greedy id is eos_id).
SECOND_EOS = ((3, 1), (4, 2))


def _eos_case(seed: int, stop: int):
    """The model, a prompt of 3 ids, its greedy run of 6 ids and an eos_id met in it."""
    c, w, g = _setup(seed)
    idx = torch.randint(0, c["vocab_size"], (1, 3), generator=g)
    greedy = o.greedy(idx[0].tolist(), 6, w, c, c["context_length"])
    return c, w, idx, greedy, greedy[3 + stop]


def _observed_eos(run, case):
    c, w, idx, _, eos = _eos_case(*case)
    return _observed(run, c, w, idx, 6, eos_id=eos)


@sg.budget(5)
@pytest.mark.spec("gpt2.generate")
@given(seed=sg.seeds, stop=st.integers(0, 3))
def test_generate_stops_at_eos_without_appending(gpt2_generate, seed, stop):
    """When the next id is ``eos_id`` generation stops and the eos id is not appended."""
    *_, greedy, eos = _eos_case(seed, stop)
    out, bugs = _observed_eos(gpt2_generate, (seed, stop))
    second = other((seed, stop), *SECOND_EOS)
    assert_equal_explained(
        out,
        [greedy[: greedy.index(eos, 3)]],
        rule="generation stops at eos_id without appending it",
        hints=bugs,
        again=lambda: _observed_eos(gpt2_generate, second),
        context=f"greedy run {greedy}, eos_id {eos}",
    )


@pytest.mark.spec("gpt2.generate")
@strict
def test_generate_batched_top_k(gpt2_generate):
    """STRICT: top-k on a batch of two prompts filters each row by its own k-th largest (greedy result per row)."""
    c, w, g = _setup(7)
    idx = torch.randint(0, c["vocab_size"], (2, 3), generator=g)
    out = gpt2_generate(
        cfg=c, weights=w, idx=idx, max_new_tokens=4, context_size=c["context_length"], temperature=0.0, top_k=2
    )
    assert_equal(
        out, [o.greedy(r.tolist(), 4, w, c, c["context_length"]) for r in idx], rule="batched generate with top_k"
    )
