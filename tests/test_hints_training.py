"""The switches of SPEC §2 (an output dtype, a crash on the default mask), §3
and §4 whose tests compare exactly or statistically (not through
assert_close's replays): an implementation that IS one switch
goes through the item's own test, failing on its input and confirmed on the
test's second input, and must be told exactly that cause."""

import numpy as np
import pytest
import torch

from lmspec.conformance.cs336 import test_attention, test_data_checkpoint, test_generation, test_loss_optim, test_nn_ops
from lmspec.conformance.cs336.oracles import nn as oracle
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
    assert _named(lambda: check(run)) == [
        "the generator argument is never drawn from (its state is unchanged after 40 samples): "
        "pass generator= to torch.multinomial"
    ]


def test_a_sampler_that_reseeds_the_generator_is_told_nothing():
    """A sampler that draws from the generator, but reseeds it from the global RNG
    first, moves the generator: not the untouched-generator switch."""

    def run(logits, temperature, top_p, generator):
        generator.manual_seed(int(torch.randint(0, 2**31, ())))
        return int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator))

    check = test_generation.test_sample_next_token_reproducible_with_seeded_generator
    assert _named(lambda: check(run)) == []


# --- §2: an output dtype, a crash on the default mask ----------------------------------
def _sdpa_needing_a_mask(scale: float):
    def run(q, k, v, mask=None):
        scores = (q @ k.transpose(-1, -2)) * scale / q.shape[-1] ** 0.5
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v  # ~None raises

    return run


def _sdpa_without_mask(run):
    case = test_attention.SECOND_SDPA[1]
    return lambda: test_attention.test_sdpa_without_mask.hypothesis.inner_test(run, "cpu", case)


def test_attention_that_needs_a_mask_is_told_so():
    assert _named(_sdpa_without_mask(_sdpa_needing_a_mask(1.0))) == [
        "mask=None not handled: without a mask, attend to every key (an all-True mask gives the right result)"
    ]


def test_attention_that_needs_a_mask_and_is_wrong_with_one_keeps_its_error():
    with pytest.raises(TypeError):
        _sdpa_without_mask(_sdpa_needing_a_mask(2.0))()


def test_rmsnorm_left_in_float32_is_told_so():
    def run(d_model, eps, weights, x):
        return oracle.rmsnorm(x, weights, eps).float()  # right values, never cast back

    case = test_nn_ops.SECOND_RMSNORM[0]
    check = test_nn_ops.test_rmsnorm_bfloat16_computed_in_float32.hypothesis.inner_test
    assert _named(lambda: check(run, "cpu", case)) == [
        "computed in float32 and returned in float32: cast the result back to the input dtype (.to(in_dtype))"
    ]


# --- §3 get_batch: the starts' distribution, the output dtype ---------------------------
STARTS = KNOWN_BUGS.causes("3.get_batch")


def _get_batch_drawing(probabilities, rng=None):
    rng = rng or np.random.default_rng(0)

    def run(x, batch_size, m, device):
        n = len(x) - m
        starts = rng.choice(n, size=batch_size, p=np.asarray(probabilities(n)))
        rows = np.stack([np.asarray(x[s : s + m + 1], dtype=np.int64) for s in starts])
        return torch.from_numpy(rows[:, :-1]).to(device), torch.from_numpy(rows[:, 1:]).to(device)

    return run


@pytest.mark.parametrize("cause", list(STARTS))
def test_a_start_distribution_switch_gets_exactly_its_cause(cause):
    run = _get_batch_drawing(STARTS[cause])
    assert _named(lambda: test_data_checkpoint.test_get_batch_starts_uniform(run, None)) == [cause]


def test_uniform_starts_pass():
    test_data_checkpoint.test_get_batch_starts_uniform(_get_batch_drawing(lambda n: [1 / n] * n), None)


def _get_batch_casting(cast):
    def run(x, batch_size, m, device):
        starts = np.random.default_rng(0).integers(0, len(x) - m, batch_size)
        rows = torch.stack([cast(torch.from_numpy(np.array(x[s : s + m + 1]))) for s in starts])
        return rows[:, :-1].to(device), rows[:, 1:].to(device)

    return run


def test_get_batch_keeping_the_arrays_dtype_is_told_so(tmp_path):
    run = _get_batch_casting(lambda t: t)
    check = test_data_checkpoint.test_get_batch_shapes_dtype_device_and_shift
    assert _named(lambda: check(run, "cpu", tmp_path, "npy-int32-mmap", None)) == [
        "the array's dtype kept (torch.from_numpy without a cast): convert to int64"
    ]


def test_get_batch_casting_to_another_dtype_is_told_nothing(tmp_path):
    run = _get_batch_casting(lambda t: t.int())  # int32 whatever the array: not the array's dtype kept
    check = test_data_checkpoint.test_get_batch_shapes_dtype_device_and_shift
    assert _named(lambda: check(run, "cpu", tmp_path, "npy-int32-mmap", None)) == []


# --- §3 cross-entropy: logits with several leading dims ---------------------------------
def _ce_rows_only(shift: float):
    def run(logits, targets):  # rows indexed by arange(batch): (batch, vocab) logits only
        picked = logits[torch.arange(logits.shape[0]), targets]
        return (logits.logsumexp(-1) - picked).mean() + shift

    return run


def test_cross_entropy_for_two_dims_only_is_told_so():
    case = test_loss_optim.CEInput((2, 3), 7, 1.0, 0)
    assert _named(lambda: test_loss_optim._check_cross_entropy(_ce_rows_only(0.0), "cpu", case)) == [
        "only (batch, vocab) logits handled: index every leading dim "
        "(the same logits as (positions, vocab) give the right value)"
    ]


def test_cross_entropy_for_two_dims_only_and_wrong_keeps_its_error():
    case = test_loss_optim.CEInput((2, 3), 7, 1.0, 0)
    with pytest.raises(IndexError):
        test_loss_optim._check_cross_entropy(_ce_rows_only(0.5), "cpu", case)


@pytest.mark.parametrize(
    "cause",
    [
        "no max subtraction: exp(o) overflows to inf (or every exp underflows to 0); "
        "use logsumexp(o) = max(o) + log Σ exp(o − max(o))",
        "log of a softmax probability that underflowed to 0: compute logsumexp(o) − o[target] "
        "instead of −log softmax(o)[target]",
    ],
)
def test_an_unstable_cross_entropy_gets_exactly_its_cause(cause):
    """Both give inf on logits × 1000; the second input (logits 100 + N(0, 1))
    tells them apart."""
    replay = KNOWN_BUGS.causes("3.cross_entropy")[cause]
    check = test_loss_optim.test_cross_entropy_finite_for_logits_times_1000
    assert _named(lambda: check(lambda o, t: replay(o, t).float(), "cpu", (8,))) == [cause]


def test_an_unshifted_denominator_is_not_the_unshifted_softmax():
    """exp(x − max) / Σ exp(x) on x − 1000 divides by 0 (inf), the unshifted
    softmax gives 0/0 (NaN): the same places, another kind, no cause."""

    def run(x, dim):
        return (x - x.amax(dim=dim, keepdim=True)).exp() / x.exp().sum(dim=dim, keepdim=True)

    case = test_nn_ops.SECOND_SOFTMAX[0]
    check = lambda: test_nn_ops._check_softmax_huge(run, "cpu", "x-1000", case, torch.float32)
    assert _named(check) == []
