"""The switches of SPEC §3 and §4 whose tests compare exactly or statistically
(not through assert_close's replays): an implementation that IS one switch
goes through the item's own test, failing on its input and confirmed on the
test's second input, and must be told exactly that cause."""

import pytest
import torch

from lmspec.conformance.cs336 import test_generation
from lmspec.conformance.cs336.oracles.training import KNOWN_BUGS, lm_logits64
from lmspec.conformance.hints import named_causes


def _named(check) -> list[str]:
    with pytest.raises(AssertionError) as failure:
        check()
    return named_causes(str(failure.value))


SAMPLING = KNOWN_BUGS.causes("4.generation/sampling")


@pytest.mark.parametrize("cause", list(SAMPLING))
def test_a_sampling_switch_gets_exactly_its_cause(cause):
    def run(logits, temperature, top_p, generator):
        if temperature == 0:
            return int(logits.argmax())
        probs = SAMPLING[cause](logits, temperature, top_p).float()
        return int(torch.multinomial(probs, 1, generator=generator))

    check = test_generation.test_sample_next_token_matches_filtered_distribution
    assert _named(lambda: check(run, "t0.8-p0.9")) == [cause]


@pytest.mark.parametrize("cause", list(test_generation._WINDOWS))
def test_a_window_switch_gets_exactly_its_cause(cause):
    window = test_generation._WINDOWS[cause]

    def run(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, theta, weights, prompt, n, t, p, eos, g):
        tokens = list(prompt)
        for _ in range(n):
            tokens.append(int(lm_logits64(test_generation.CFG, weights, window(tokens))[-1].argmax()))
            if tokens[-1] == eos:
                break
        return tokens[len(prompt) :]

    assert _named(lambda: test_generation.test_generate_uses_last_context_length_tokens(run)) == [cause]


def test_a_sampler_on_the_global_rng_is_told_so():
    def run(logits, temperature, top_p, generator):
        return int(torch.multinomial(torch.softmax(logits / temperature, -1), 1))  # no generator=

    check = test_generation.test_sample_next_token_reproducible_with_seeded_generator
    assert _named(lambda: check(run)) == ["the generator argument is ignored: the samples follow torch's global RNG"]


def test_a_sampler_that_repeats_by_chance_is_told_nothing():
    """A sampler whose output depends on neither RNG is not the global-RNG switch."""
    calls = iter(range(10**6))

    def run(logits, temperature, top_p, generator):
        return next(calls) % logits.shape[-1]

    check = test_generation.test_sample_next_token_reproducible_with_seeded_generator
    assert _named(lambda: check(run)) == []
