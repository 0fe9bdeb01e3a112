"""The gpt2 profile's single-switch catalog, generated from its registry
(conformance/gpt2/known_bugs.py): for every known bug of every gpt2 item, an
implementation that IS that switch (its float64 replay, handed back in
float32 as a graded implementation's output would be) goes through the
item's own test, on a pinned input that fails and a second one that
confirms; the test must name exactly that cause, its own and no other. Nobody
picks these bugs: every switch registered is one, the next one included (the
cs336 twin: tests/test_hints_switches.py)."""

import pytest
import torch
from switch_catalog import failure_causes

from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import (
    test_attention,
    test_data,
    test_generation,
    test_layers,
    test_load_weights,
    test_loss,
    test_model,
)
from lmspec.conformance.gpt2.known_bugs import KNOWN_BUGS


def _f32(t):
    return t.float() if isinstance(t, torch.Tensor) else t


def _layernorm(replay):
    def run(emb_dim, weights, in_features):
        return _f32(replay(in_features, weights))

    case = test_layers.SECOND_LN[0]
    return lambda: test_layers.test_layernorm_matches_float64.hypothesis.inner_test(run, case)


def _layernorm_eps(replay):
    def run(emb_dim, weights, in_features):
        return _f32(replay(in_features, weights))

    return lambda: test_layers.test_layernorm_near_constant_rows(run, 0)


def _layernorm_init(replay):
    def run(emb_dim, weights, in_features):
        assert weights is None
        return _f32(replay(in_features))

    return lambda: test_layers.test_layernorm_initial_scale_one_shift_zero(run)


def _gelu(replay):
    # seed 5, (2, 3, 8), std 2: SECOND_GELU[0], so the test's second input is SECOND_GELU[1]
    return lambda: test_layers.test_gelu_is_the_tanh_form.hypothesis.inner_test(
        lambda in_features: _f32(replay(in_features)), 5, (2, 3, 8), 2.0
    )


def _feedforward(replay):
    def run(cfg, weights, in_features):
        return _f32(replay(in_features, weights))

    # seed 7, width 8, 4 tokens, batch 2: SECOND_FF[0]
    return lambda: test_layers.test_feedforward_matches_float64.hypothesis.inner_test(run, 7, 8, 4, 2)


def _mha(replay):
    def run(d_in, d_out, context_length, dropout, num_heads, qkv_bias, weights, in_features, train, seed):
        assert not train
        return _f32(replay(in_features, weights, num_heads))

    seconds = test_attention.SECOND_SQUARE
    return lambda: test_attention._check(run, seconds[0], seconds)


def _mha_eval(replay):
    def run(d_in, d_out, context_length, dropout, num_heads, qkv_bias, weights, in_features, train, seed):
        assert not train
        return _f32(replay(in_features, weights, num_heads, dropout, seed))

    seconds = test_attention.SECOND_SQUARE
    return lambda: test_attention._check(run, seconds[0], seconds)


def _block(replay):
    def run(cfg, weights, in_features):
        return _f32(replay(in_features, weights, cfg["n_heads"]))

    case = test_model.SECOND_MODELS[0]
    return lambda: test_model.test_block_matches_float64.hypothesis.inner_test(run, None, case)


def _model(replay):
    def run(cfg, weights, in_idx, seed):
        return _f32(replay(in_idx, weights, cfg))

    case = test_model.SECOND_MODELS[0]
    return lambda: test_model.test_model_logits_match_float64.hypothesis.inner_test(run, None, case)


def _loss(replay):
    def run(cfg, weights, batches, num_batches):
        return float(replay([(o.model(x, weights, cfg), y) for x, y in batches], num_batches))

    seed, n, num = test_loss.SECOND_LOADERS[0]
    return lambda: test_loss.test_calc_loss_loader_mean_of_first_batches.hypothesis.inner_test(run, seed, n, num)


def _dataset(fixtures_dir):
    ids = test_data._ids(o.gpt2_encoding(fixtures_dir / "gpt2_vocab.json"))

    def check(replay):
        def run(txt, max_length, stride):
            assert txt == test_data.TEXT
            inputs, targets = replay(ids, max_length, stride)
            return {"inputs": inputs, "targets": targets}

        length, stride = test_data.SECOND_WINDOWS[0]
        encoding = o.gpt2_encoding(fixtures_dir / "gpt2_vocab.json")
        return lambda: test_data.test_dataset_windows.hypothesis.inner_test(run, encoding, length, stride)

    return check


def _generate_simple(replay):
    def run(cfg, weights, idx, max_new_tokens, context_size):
        return replay(idx.tolist(), max_new_tokens, weights, cfg, context_size)

    case = test_generation.SECOND_SIMPLE[0]
    return lambda: test_generation.test_generate_text_simple_is_greedy.hypothesis.inner_test(run, *case)


def _generate_run(replay):
    def run(cfg, weights, idx, max_new_tokens, context_size, temperature=0.0, top_k=None, eos_id=None, seed=0):
        return replay(idx[0].tolist(), max_new_tokens, weights, cfg, temperature, top_k, eos_id, seed)

    return run


def _generate(replay):
    run = _generate_run(replay)
    seed, temperature, top_k = test_generation.SECOND_SAMPLES[0]
    stream = test_generation.test_generate_samples_the_books_stream.hypothesis.inner_test
    return lambda: stream(run, seed, temperature, top_k)


def _generate_eos(replay):
    run = _generate_run(replay)
    seed, stop = test_generation.SECOND_EOS[0]
    return lambda: test_generation.test_generate_stops_at_eos_without_appending.hypothesis.inner_test(run, seed, stop)


def _draws(replay, name="t2.0-k5"):
    def run(cfg, weights, idx, context_size, temperature, top_k, seeds):
        probs = replay(o.next_logits(idx[0].tolist(), weights, cfg), temperature, top_k).float()
        return [int(torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(s))) for s in seeds]

    # top-k 5 at T 2 (k's switches), T 0.5 alone (the temperature's: at T 2 an unused T is too close)
    return lambda: test_generation.test_generate_samples_follow_the_filtered_distribution(run, name)


def _load_weights(replay):
    def run(cfg, params, in_idx):
        return _f32(replay(in_idx, params, cfg))

    hf = o.hf_gpt2(test_load_weights.CFG, seed=0)
    # seed 7, 9 tokens: SECOND_IDS[0]
    return lambda: test_load_weights.test_loaded_logits_agree_with_transformers.hypothesis.inner_test(run, hf, 7, 9)


def _mha_train(replay):
    def run(d_in, d_out, context_length, dropout, num_heads, qkv_bias, weights, in_features, train, seed):
        assert train
        return _f32(replay(in_features, weights, num_heads, dropout, seed))

    return lambda: test_attention.test_mha_dropout_acts_on_attention_weights(run)


def _model_eval(replay):
    def run(cfg, weights, in_idx, seed):
        return _f32(replay(in_idx, weights, cfg, seed))

    case = test_model.SECOND_MODELS[0]
    return lambda: test_model.test_model_logits_match_float64.hypothesis.inner_test(run, None, case)


CHECKS = {
    "gpt2.layernorm": _layernorm,
    "gpt2.layernorm/eps": _layernorm_eps,
    "gpt2.layernorm/init": _layernorm_init,
    "gpt2.gelu": _gelu,
    "gpt2.feedforward": _feedforward,
    "gpt2.mha": _mha,
    "gpt2.mha/eval": _mha_eval,
    "gpt2.mha/train": _mha_train,
    "gpt2.block": _block,
    "gpt2.model": _model,
    "gpt2.model/eval": _model_eval,
    "gpt2.loss": _loss,
    "gpt2.dataset": None,  # needs the fixture vocabulary: built in the test
    "gpt2.generate_simple": _generate_simple,
    "gpt2.generate": _generate,
    "gpt2.generate/draws": _draws,
    "gpt2.load_weights": _load_weights,
}
#: switches checked by another test of their item than the item's first
OTHER_TESTS = {("gpt2.generate", "the eos id is appended before stopping"): _generate_eos} | {
    (b.item, b.cause): lambda replay: _draws(replay, "t0.5")
    for b in KNOWN_BUGS.of("gpt2.generate/draws")
    if "temperature" in b.cause
}
SWITCHES = list(KNOWN_BUGS)


def test_every_registered_item_is_checked():
    assert {b.item for b in SWITCHES} == set(CHECKS)


@pytest.mark.parametrize("bug", SWITCHES, ids=[f"{b.item}: {b.cause[:48]}" for b in SWITCHES])
def test_a_gpt2_switch_gets_exactly_its_cause(bug, fixtures_dir):
    build = OTHER_TESTS.get((bug.item, bug.cause)) or CHECKS[bug.item] or _dataset(fixtures_dir)
    assert failure_causes(build(bug.replay)) == [bug.cause]
