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

strict = pytest.mark.strict


def _setup(seed: int, context: int = 8, vocab: int = 40):
    c = o.cfg(vocab=vocab, context=context, emb=16, heads=2, layers=1, drop=0.1)
    g = sg.generator(seed)
    w = o.model_weights(g, c)
    w["out_head.weight"] = w["out_head.weight"] * 6.0  # clear argmax margins
    return c, w, g


@sg.budget(6)
@pytest.mark.spec("gpt2.generate_simple")
@given(seed=sg.seeds, batch=st.integers(1, 3), prompt=st.integers(1, 5), new=st.integers(1, 8), crop=st.integers(2, 8))
def test_generate_text_simple_is_greedy(gpt2_generate_simple, seed, batch, prompt, new, crop):
    """The last ``context_size`` ids go in, the argmax of the last position is appended, ``max_new_tokens`` times."""
    c, w, g = _setup(seed)
    idx = torch.randint(0, c["vocab_size"], (batch, prompt), generator=g)
    out = gpt2_generate_simple(cfg=c, weights=w, idx=idx, max_new_tokens=new, context_size=crop)
    expected = [o.greedy(row.tolist(), new, w, c, crop) for row in idx]
    crop_front = [row.tolist() for row in idx]
    for row in crop_front:
        for _ in range(new):
            row.append(int(o.model(torch.tensor([row[:crop]]), w, c)[0, -1].argmax()))
    front = torch.as_tensor(out).tolist() == crop_front and crop_front != expected
    assert_equal_explained(
        out,
        expected,
        rule="greedy generation over the last context_size ids",
        causes=["the first context_size ids are kept instead of the last"] if front else [],
        context=f"prompt {idx.tolist()}, context_size {crop}",
    )


def _sample_replay(prompt, steps, w, c, seed, temperature, top_k, eos_id=None):
    """``generate`` replayed: torch.manual_seed(seed), then per step softmax of
    the (top-k filtered) last logits over temperature, torch.multinomial."""
    torch.manual_seed(seed)
    ids = list(prompt)
    for _ in range(steps):
        logits = o.next_logits(ids, w, c)
        if top_k is not None:
            logits = o.top_k_filter(logits, top_k)
        probs = torch.softmax((logits / temperature).float(), -1)
        nxt = int(torch.multinomial(probs[None], num_samples=1))
        if nxt == eos_id:
            break
        ids.append(nxt)
    return ids


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


@sg.budget(8)
@pytest.mark.spec("gpt2.generate")
@given(seed=sg.seeds, temperature=st.sampled_from([0.7, 1.0, 1.5]), top_k=st.sampled_from([None, 2, 5]))
def test_generate_samples_like_the_book(gpt2_generate, seed, temperature, top_k):
    """``temperature > 0``: logits (top-k filtered) divided by the temperature,
    softmax, ``torch.multinomial`` after ``torch.manual_seed(seed)``: the same
    ids as the replay."""
    c, w, g = _setup(seed)
    c_w = dict(w)
    c_w["out_head.weight"] = w["out_head.weight"] / 6.0  # flatter: sampling matters
    idx = torch.randint(0, c["vocab_size"], (1, 3), generator=g)
    out = gpt2_generate(
        cfg=c,
        weights=c_w,
        idx=idx,
        max_new_tokens=6,
        context_size=c["context_length"],
        temperature=temperature,
        top_k=top_k,
        seed=seed,
    )
    expected = _sample_replay(idx[0].tolist(), 6, c_w, c, seed, temperature, top_k)
    hints = []
    if top_k is not None and torch.as_tensor(out).tolist() == [
        _sample_replay(idx[0].tolist(), 6, c_w, c, seed, temperature, top_k + 1)
    ]:
        hints.append("top-k keeps k+1 ids (off by one)")
    if (
        top_k is not None
        and top_k > 1
        and torch.as_tensor(out).tolist() == [_sample_replay(idx[0].tolist(), 6, c_w, c, seed, temperature, top_k - 1)]
    ):
        hints.append("top-k keeps k−1 ids (off by one)")
    if (
        torch.as_tensor(out).tolist() == [_sample_replay(idx[0].tolist(), 6, c_w, c, seed, 1.0, top_k)]
        and temperature != 1.0
    ):
        hints.append("logits not divided by the temperature")
    assert_equal_explained(
        out,
        [expected],
        rule="sampling: top-k, /temperature, softmax, torch.multinomial",
        causes=hints,
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


@sg.budget(5)
@pytest.mark.spec("gpt2.generate")
@given(seed=sg.seeds, stop=st.integers(0, 3))
def test_generate_stops_at_eos_without_appending(gpt2_generate, seed, stop):
    """When the next id is ``eos_id`` generation stops and the eos id is not appended."""
    c, w, g = _setup(seed)
    idx = torch.randint(0, c["vocab_size"], (1, 3), generator=g)
    greedy = o.greedy(idx[0].tolist(), 6, w, c, c["context_length"])
    eos = greedy[3 + stop]
    first = greedy.index(eos, 3)
    expected = greedy[:first]
    out = gpt2_generate(
        cfg=c, weights=w, idx=idx, max_new_tokens=6, context_size=c["context_length"], temperature=0.0, eos_id=eos
    )
    got = torch.as_tensor(out).tolist()
    appended = got == [greedy[: first + 1]]
    assert_equal_explained(
        out,
        [expected],
        rule="generation stops at eos_id without appending it",
        causes=["the eos id is appended before stopping"] if appended else [],
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
