"""SPEC §4 generation (extended profile: every test skips as "not provided"
when the implementation lacks the function): temperature softmax, top-p
filtering, one sampling step, and the decoding loop.

Oracles run in float64 (conformance/cs336/oracles/training.py), including a float64
LM for greedy decoding built from the same weights. Sampling is checked
statistically with false-failure probability ≤ 1e-6 (conformance/stats.py).
"""

import functools

import pytest
import torch
from hypothesis import example, given, note

from lmspec.conformance import hints, near, stats
from lmspec.conformance.asserts import assert_close, assert_equal, assert_shape
from lmspec.conformance.cs336.oracles.training import (
    F64,
    KNOWN_BUGS,
    LMConfig,
    greedy_decode64,
    lm_logits64,
    random_lm_weights,
    temperature_softmax64,
    top_p_filter64,
)
from lmspec.conformance.cs336.strategies.training import (
    TemperatureCase,
    TopPCase,
    temperature_cases,
    top_p_cases,
)
from lmspec.conformance.tolerances import EXACT, GREEDY_LOGIT_F32, TEMPERATURE_F32, TOP_P_F32, Tolerance

spec = pytest.mark.spec


# --- temperature ------------------------------------------------------------------------
def _logits(case: TemperatureCase) -> torch.Tensor:
    gen = torch.Generator().manual_seed(case.seed)
    return torch.randn(*case.lead, case.vocab, generator=gen) * case.scale


@spec("4.generation")
@given(case=temperature_cases())
@example(case=TemperatureCase((), 10, 1.0, 1.0, 0))
@example(case=TemperatureCase((2,), 5, 100.0, 0.05, 1))
def test_temperature_softmax_matches_float64(run_temperature_softmax, device, case):
    """softmax(v / τ) over the last dimension (float64 oracle), finite for large v/τ."""
    logits = _logits(case)
    got, bugs = _tempered(run_temperature_softmax, device, logits, case.temperature)
    assert_shape(got, logits.shape, rule="4.generation: temperature softmax keeps the logits' shape")
    span = float(logits.abs().max()) / case.temperature
    second = hints.other(case, *_SECOND_TEMPERATURES)
    assert_close(
        got,
        temperature_softmax64(logits, case.temperature),
        Tolerance(TEMPERATURE_F32.atol * max(1.0, span), TEMPERATURE_F32.rtol),
        rule=f"4.generation: softmax(v / τ) with τ = {case.temperature:.4g}",
        hints=bugs,
        again=lambda: _tempered(run_temperature_softmax, device, _logits(second), second.temperature),
        context=f"logits {tuple(logits.shape)} float32 (std {case.scale:.3g}) on {device}",
        near=(near.sums_to_one(-1), near.scale),
    )


#: The second input of the temperature test (τ ≠ 1: a bug that ignores τ shows).
_SECOND_TEMPERATURES = (TemperatureCase((3,), 8, 2.0, 0.7, 21), TemperatureCase((2, 2), 6, 1.0, 1.6, 22))


def _tempered(run_temperature_softmax, device, logits: torch.Tensor, temperature: float):
    got = run_temperature_softmax(logits.to(device), temperature)
    return got, KNOWN_BUGS.thunks("4.generation/temperature", logits, temperature)


@spec("4.generation")
def test_temperature_zero_is_greedy_and_small_is_near_greedy(run_temperature_softmax, device):
    """τ = 0 gives one-hot at the argmax; τ → 0 approaches it without NaN."""
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.5], [10.0, -4.0, 9.0, 0.0]])
    one_hot = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=F64)
    got = run_temperature_softmax(logits.to(device), 0.0)
    assert_close(got, one_hot, EXACT, rule="4.generation: τ = 0 means greedy: one-hot at the argmax")
    tiny = run_temperature_softmax(logits.to(device), 1e-3)
    assert_close(
        tiny,
        one_hot,
        Tolerance(1e-6, 0.0),
        rule="4.generation: τ = 1e-3 is (numerically) greedy, no NaN",
    )


# --- top-p ------------------------------------------------------------------------------------
_DYADIC = [
    0.125,
    0.5,
    0.0625,
    0.25,
    0.0625,
]  # exact in every float format: no rounding at the boundary
_TOP_P_CASES = {  # top_p -> kept indices
    0.01: [1],
    0.5: [1],  # 0.5 alone reaches p exactly
    0.75: [1, 3],  # 0.5 + 0.25 = 0.75 ≥ 0.75: keep two, not three
    0.76: [1, 3, 0],
    0.875: [1, 3, 0],
    1.0: [1, 3, 0, 2, 4],  # all: the dyadic masses sum to exactly 1
}


def _filtered(run_top_p_filter, device, top_p: float):
    probs = torch.tensor(_DYADIC)
    return run_top_p_filter(probs.to(device), top_p), KNOWN_BUGS.thunks("4.generation/top_p", probs, top_p)


def _expected_kept(probs: list[float], kept: list[int]) -> torch.Tensor:
    out = torch.zeros(len(probs), dtype=F64)
    mass = sum(probs[i] for i in kept)
    for i in kept:
        out[i] = probs[i] / mass
    return out


@spec("4.generation")
@pytest.mark.parametrize("top_p", [0.01, 0.5, 0.75, 0.76, 0.875, 1.0], ids=lambda p: f"p={p}")
def test_top_p_keeps_smallest_set_at_exact_boundaries(run_top_p_filter, device, top_p):
    """Keep the smallest set of most-probable tokens with total ≥ p (a set that
    reaches p exactly is enough), renormalise, others exactly 0."""
    kept = _TOP_P_CASES[top_p]
    got, bugs = _filtered(run_top_p_filter, device, top_p)
    expected = _expected_kept(_DYADIC, kept)
    second = hints.other(top_p, 0.875, 0.76)  # three tokens kept: one too few or too many shows
    assert_close(
        got,
        expected,
        TOP_P_F32,
        rule=f"4.generation: top-p {top_p} of {_DYADIC} keeps {len(kept)} token(s), renormalised",
        hints=bugs,
        again=lambda: _filtered(run_top_p_filter, device, second),
        near=(near.zeros, near.sums_to_one(-1)),
    )
    dropped = expected == 0
    assert bool((got.detach().cpu()[dropped] == 0).all()), "4.generation: filtered-out tokens must be exactly 0"


@spec("4.generation")
def test_top_p_batched_rows_and_ties(run_top_p_filter, device):
    """Each row of a (batch, vocab) input is filtered on its own; with four tied
    tokens of 0.25 and p = 0.5 exactly two are kept at 0.5 each."""
    probs = torch.tensor([_DYADIC, [0.25, 0.25, 0.25, 0.25, 0.0]])
    got = run_top_p_filter(probs.to(device), 0.5).detach().cpu().double()
    assert_close(got[0], _expected_kept(_DYADIC, [1]), TOP_P_F32, rule="4.generation: top-p row 0 of a batch")
    nonzero = got[1][got[1] != 0]
    assert len(nonzero) == 2 and bool(((nonzero - 0.5).abs() <= 1e-7).all()), (
        f"4.generation: 4 tied tokens of 0.25 with p = 0.5 must keep exactly two at 0.5; got {got[1].tolist()}"
    )


@spec("4.generation")
@given(case=top_p_cases())
@example(case=TopPCase((1.0, 1.0, 1.0, 1.0), 0.5, False))
def test_top_p_keeps_smallest_most_probable_set(run_top_p_filter, device, case):
    """For any distribution: kept tokens are the most probable ones, their mass is
    ≥ p, dropping the least of them would fall below p, and they are renormalised."""
    w = torch.tensor(case.weights, dtype=F64)
    probs = (w / w.sum()).float()
    inp = torch.stack([probs, probs.flip(0)]) if case.batch else probs
    got = run_top_p_filter(inp.to(device), case.top_p).detach().cpu().double()
    assert_shape(got, inp.shape, rule="4.generation: top-p keeps the shape")
    rows = [(got[0], probs), (got[1], probs.flip(0))] if case.batch else [(got, probs)]
    slack = 1e-6  # float32 cumulative sums may round either way right at p
    for out, p in rows:
        p64 = p.double()
        kept = out != 0
        mass = float(p64[kept].sum())
        note(f"kept {kept.nonzero().flatten().tolist()}, mass {mass:.9g}")
        assert bool(kept.any()), "4.generation: top-p must keep at least one token"
        assert float(p64[kept].min()) >= max(p64[~kept].tolist(), default=0.0), (
            "4.generation: top-p kept a less probable token over a more probable one: "
            f"probs {p.tolist()}, out {out.tolist()}"
        )
        assert mass >= case.top_p - slack, f"4.generation: kept mass {mass} < p = {case.top_p}: kept one token too few"
        assert mass - float(p64[kept].min()) < case.top_p + slack, (
            f"4.generation: kept mass {mass} still ≥ p = {case.top_p} without its least token: not the smallest set"
        )
        expected = torch.where(kept, p64 / mass, torch.zeros_like(p64))
        assert_close(out, expected, TOP_P_F32, rule="4.generation: kept probabilities renormalised to sum 1")


# --- one sampling step ---------------------------------------------------------------------
_SAMPLING_CASES = {  # (logits, temperature, top_p): cumulative sums stay ≥ 1e-3 away from p
    "t0.8-p0.9": ([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0, -3.0, -4.0], 0.8, 0.9),
    "t1.5-p1.0": ([1.0, 0.2, -0.5, 0.7, -1.0, 0.0], 1.5, 1.0),
}


#: The sampling test's second inputs, for its likely causes only (oracles/training.py,
#: "4.generation/sampling"): τ ≠ 1 and p < 1, where every switch differs from the oracle.
_SECOND_SAMPLING = (
    ([1.5, 1.1, 0.8, 0.2, -0.3, -1.0, -2.0], 0.7, 0.8),
    ([0.9, 0.4, 0.1, -0.2, -0.6, -1.5], 1.6, 0.7),
)


def _draw(run_sample_next_token, values, temperature, top_p, draws=2000) -> list[int]:
    """Per-token counts of ``draws`` samples from a generator seeded 2024: ``draws`` calls in a
    row, in one round trip to the worker (RemoteFunction.repeat) where the function has one (the
    plain functions tests/test_hints_training.py passes are called one by one)."""
    gen = torch.Generator().manual_seed(2024)
    counts = [0] * len(values)
    if hasattr(run_sample_next_token, "repeat"):
        tokens = run_sample_next_token.repeat(draws, torch.tensor(values), temperature, top_p, gen)
    else:
        tokens = [run_sample_next_token(torch.tensor(values), temperature, top_p, gen) for _ in range(draws)]
    for token in map(int, tokens):
        assert 0 <= token < len(values), f"4.generation: sampled id {token} outside 0..{len(values) - 1}"
        counts[token] += 1
    return counts


def _sampling_causes(counts, values, temperature, top_p) -> list[str]:
    """The sampling switches whose distribution the counts pass the oracle's test against."""
    logits = torch.tensor(values)
    return [
        cause
        for cause, replay in KNOWN_BUGS.causes("4.generation/sampling").items()
        if stats.check_distribution(counts, replay(logits, temperature, top_p).tolist(), labels="token") is None
    ]


@spec("4.generation")
@pytest.mark.parametrize("name", list(_SAMPLING_CASES))
def test_sample_next_token_matches_filtered_distribution(run_sample_next_token, name):
    """Samples follow top_p(softmax(v/τ)): tokens outside the nucleus never
    appear, per-token counts and the CDF over 2000 draws pass Chernoff bounds
    (false-failure probability ≤ 1e-6 for any seed; conformance/stats.py)."""
    values, temperature, top_p = _SAMPLING_CASES[name]
    logits = torch.tensor(values)
    probs = top_p_filter64(temperature_softmax64(logits, temperature), top_p)
    sorted_cum = temperature_softmax64(logits, temperature).sort(descending=True).values.cumsum(0)
    assert bool(((sorted_cum - top_p).abs() >= 1e-3).all() | (top_p == 1.0)), "test case too close to the boundary"
    counts = _draw(run_sample_next_token, values, temperature, top_p)
    problem = stats.check_distribution(counts, probs.tolist(), labels="token")
    second = hints.other(_SAMPLING_CASES[name], *_SECOND_SAMPLING)
    causes = (
        hints.confirmed(
            _sampling_causes(counts, values, temperature, top_p),
            lambda: _sampling_causes(_draw(run_sample_next_token, *second), *second),
        )
        if problem
        else []
    )
    assert problem is None, (
        f"4.generation: samples do not follow top_p(softmax(v/τ)) with τ={temperature}, "
        f"p={top_p}: {problem}{hints.likely_causes(causes)}\n"
        f"  counts {counts}\n  expected probabilities {[round(x, 4) for x in probs.tolist()]}"
    )


@spec("4.generation")
def test_sample_next_token_zero_temperature_is_argmax(run_sample_next_token):
    """τ = 0 always picks the argmax, whatever top_p and the generator."""
    logits = torch.tensor([0.1, -2.0, 3.5, 3.4, 0.0])
    gen = torch.Generator().manual_seed(0)
    got = [int(run_sample_next_token(logits, 0.0, p, gen)) for p in (0.1, 0.9, 1.0) for _ in range(5)]
    assert_equal(got, [2] * 15, rule="4.generation: τ = 0 is greedy (argmax)")


@spec("4.generation")
def test_sample_next_token_reproducible_with_seeded_generator(run_sample_next_token):
    """Sampling draws from the given generator: equal seeds give equal tokens."""
    logits = torch.tensor([0.0, 0.3, -0.2, 0.1, 0.2, -0.1])

    def draw(seed: int, global_seed: int) -> list[int]:
        gen = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(global_seed)  # the global RNG must not matter
            return [int(run_sample_next_token(logits, 1.0, 1.0, gen)) for _ in range(40)]

    def generator_untouched(seed: int) -> list[str]:
        """The cause, where 40 samples vary but the generator passed in is never
        drawn from (its state after them is the seeded one: the worker writes a
        generator's state back after each call)."""
        gen = torch.Generator().manual_seed(seed)
        seeded = gen.get_state().clone()
        samples = [int(run_sample_next_token(logits, 1.0, 1.0, gen)) for _ in range(40)]
        if len(set(samples)) > 1 and torch.equal(gen.get_state(), seeded):
            return [
                "the generator argument is never drawn from (its state is unchanged after 40 samples): "
                "pass generator= to torch.multinomial"
            ]
        return []

    hints.failing_with_causes(
        lambda: assert_equal(
            draw(5, global_seed=1),
            draw(5, global_seed=2),
            rule="4.generation: same generator seed, same samples (use the generator argument)",
        ),
        lambda: hints.confirmed(generator_untouched(5), lambda: generator_untouched(7)),
    )


# --- the decoding loop --------------------------------------------------------------------------
CFG = LMConfig(vocab_size=24, context_length=8, d_model=16, num_layers=2, num_heads=2, d_ff=32)
PROMPT = [3, 17, 5]


@functools.cache
def _lm(min_gap: float = 50 * GREEDY_LOGIT_F32.atol):
    """Weights (deterministic seed search) whose float64 greedy decode has a
    top-1/top-2 logit gap ≥ 50× the float32 tolerance at every step, for the
    short prompt and for a prompt longer than the context: greedy is then
    unambiguous for any correct float32 implementation."""
    long_prompt = [(7 * i + 2) % CFG.vocab_size for i in range(CFG.context_length + 3)]
    for seed in range(200):
        w = random_lm_weights(CFG, seed)
        short, gap1 = greedy_decode64(CFG, w, PROMPT, 10)
        long, gap2 = greedy_decode64(CFG, w, long_prompt, 6)
        if min(gap1, gap2) >= min_gap and len(set(short)) >= 3:
            return w, short, long_prompt, long
    raise RuntimeError("no seed gives well-separated greedy logits")


def _unused_id(*sequences: list[int]) -> int:
    """An in-vocabulary id that the greedy decodes never emit (a harmless eos)."""
    used = {t for seq in sequences for t in seq}
    return min(set(range(CFG.vocab_size)) - used)


def _generate(run_generate, weights, prompt, max_new, *, eos, temperature=0.0, top_p=1.0, seed=0) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    out = run_generate(*CFG, weights, list(prompt), max_new, temperature, top_p, eos, gen)
    return [int(t) for t in out]


#: The tokens the model runs on at each step, as the window's switches take them
#: (the oracle's is the last context_length).
_WINDOWS = {
    "the model ran on the whole sequence instead of the last context_length tokens": lambda tokens: tokens,
    "the model ran on the first context_length tokens instead of the last": lambda tokens: tokens[: CFG.context_length],
}
#: The decoding tests' second input for their likely causes: a prompt longer than the context.
_SECOND_PROMPT = [(5 * i + 4) % CFG.vocab_size for i in range(CFG.context_length + 2)]


def _window_causes(got: list[int], weights, prompt: list[int]) -> list[str]:
    """The window switches whose float64 greedy decode gives ``got``."""
    named = []
    for cause, window in _WINDOWS.items():
        tokens = list(prompt)
        for _ in got:
            tokens.append(int(lm_logits64(CFG, weights, window(tokens))[-1].argmax()))
        if tokens[len(prompt) :] == got:
            named.append(cause)
    return named


def _check_greedy(run_generate, weights, prompt, expected, rule: str) -> None:
    """The greedy decode of ``prompt`` is ``expected``; where it is not, the
    window switches that give it here and on the second prompt are named."""
    __tracebackhide__ = True
    got = _generate(run_generate, weights, prompt, len(expected), eos=_unused_id(expected))
    second = _SECOND_PROMPT

    def again() -> list[str]:
        want, _ = greedy_decode64(CFG, weights, second, len(expected))
        return _window_causes(
            _generate(run_generate, weights, second, len(want), eos=_unused_id(want)), weights, second
        )

    hints.failing_with_causes(
        lambda: assert_equal(got, expected, rule=rule, context=f"prompt {prompt}"),
        lambda: hints.confirmed(_window_causes(got, weights, prompt), again),
    )


@spec("4.generation")
def test_generate_greedy_matches_float64_oracle(run_generate):
    """τ = 0 decodes greedily: the new tokens equal the float64 oracle's greedy
    continuation (run on the last context_length tokens), max_new_tokens of them."""
    weights, expected, _, _ = _lm()
    _check_greedy(run_generate, weights, PROMPT, expected, "4.generation: greedy continuation (new tokens only)")


@spec("4.generation")
def test_generate_stops_after_eos(run_generate):
    """Generation stops right after emitting the end-of-text token, which is included."""
    weights, greedy, _, _ = _lm()
    j = next(i for i in range(1, len(greedy)) if greedy[i] not in greedy[:i])
    got = _generate(run_generate, weights, PROMPT, len(greedy), eos=greedy[j])
    want = greedy[: j + 1]
    # the tokens themselves are the evidence: the right ones, then more after eos (or eos missing)
    if len(got) > len(want) and got[: j + 1] == want:
        causes = ["the loop does not stop at eos"]
    elif got == want[:-1]:
        causes = ["eos was dropped from the returned tokens"]
    else:
        causes = []
    hints.failing_with_causes(
        lambda: assert_equal(
            got,
            want,
            rule="4.generation: stop after emitting eos (included)",
            context=f"prompt {PROMPT}, eos {greedy[j]}",
        ),
        lambda: causes,
    )


@spec("4.generation")
def test_generate_uses_last_context_length_tokens(run_generate):
    """A prompt longer than context_length: each step runs the model on the last
    context_length tokens only (float64 oracle with the same window)."""
    weights, _, long_prompt, expected = _lm()
    rule = f"4.generation: prompt of {len(long_prompt)} tokens > context_length {CFG.context_length}"
    _check_greedy(run_generate, weights, long_prompt, expected, rule)


@spec("4.generation")
@pytest.mark.parametrize("seed", [0, 1])
def test_generate_sampling_respects_max_new_tokens_and_eos(run_generate, seed):
    """Sampling (τ = 1, p = 0.9): ids in 0..vocab−1, at most max_new_tokens; it
    ends early only right after eos; the same generator seed repeats the output."""
    weights, greedy, _, _ = _lm()
    eos = greedy[1]
    max_new = 12
    got = _generate(run_generate, weights, PROMPT, max_new, temperature=1.0, top_p=0.9, eos=eos, seed=seed)
    assert all(0 <= t < CFG.vocab_size for t in got), f"4.generation: ids outside 0..{CFG.vocab_size - 1}: {got}"
    assert 1 <= len(got) <= max_new, f"4.generation: {len(got)} new tokens, max_new_tokens is {max_new}: {got}"
    if eos in got:
        assert got.index(eos) == len(got) - 1, f"4.generation: tokens after eos {eos}: {got} (must stop at eos)"
    else:
        assert len(got) == max_new, f"4.generation: stopped after {len(got)} tokens without eos ({eos}): {got}"
    again = _generate(run_generate, weights, PROMPT, max_new, temperature=1.0, top_p=0.9, eos=eos, seed=seed)
    assert_equal(again, got, rule="4.generation: the same generator seed must give the same sample")
