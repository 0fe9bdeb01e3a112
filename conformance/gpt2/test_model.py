"""SPEC §6.1 TransformerBlock and GPTModel against a float64 forward pass
of the book's weights (oracles.model)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmspec.conformance import hints, tolerances
from lmspec.conformance.asserts import assert_close, assert_shape
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.gpt2.known_bugs import KNOWN_BUGS
from lmspec.conformance.gpt2.parts import swaps
from lmspec.conformance.hints import other
from lmspec.conformance.tolerances import Tolerance

TOL = tolerances.GPT2_MODEL_F32
strict = pytest.mark.strict


def _block_case(case: sg.ModelCase) -> tuple[dict, dict, torch.Tensor]:
    """(cfg, block weights, x) of a block test, drawn from a model case."""
    c = case.cfg
    g = sg.generator(int(case.ids.sum()))
    w = o.block_weights(g, c)
    return c, w, sg.randn(g, case.ids.shape[0], case.ids.shape[1], c["emb_dim"])


def _block_observed(run, impl, block_case):
    """The implementation's block, the block's known bugs replayed, and the
    oracle's block with each of the implementation's parts swapped in (a
    failure its failing part explains)."""
    c, w, x = block_case

    def composite(**kw):
        return o.block(x, w, c["n_heads"], **kw)

    out = run(cfg=c, weights=w, in_features=x)
    bugs = KNOWN_BUGS.thunks("gpt2.block", x, w, c["n_heads"])
    return out, bugs + hints.part_hints(swaps(impl, c, "gpt2.block", composite), composite, TOL)


@sg.budget(6)
@pytest.mark.spec("gpt2.block")
@given(case=sg.model_cases(layers=(1, 1)))
def test_block_matches_float64(gpt2_block, impl, case):
    """``x + att(norm1(x))`` then ``x + ff(norm2(x))`` (eval mode, drop_rate 0.1)."""
    c, w, x = block = _block_case(case)
    out, parts = _block_observed(gpt2_block, impl, block)
    assert_shape(out, x.shape, rule="TransformerBlock keeps (batch, tokens, emb_dim)")
    second = _block_case(other(case, *SECOND_MODELS))
    assert_close(
        out,
        o.block(x, w, c["n_heads"]),
        TOL,
        rule="pre-norm block with shortcuts",
        hints=parts,
        again=lambda: _block_observed(gpt2_block, impl, second),
        context=f"x{tuple(x.shape)}",
    )


@pytest.mark.spec("gpt2.block")
def test_block_drop_rate_zero_is_identity_in_training(gpt2_block):
    """With drop_rate 0, training mode gives the eval output."""
    c = o.cfg(drop=0.0)
    g = sg.generator(8)
    w = o.block_weights(g, c)
    x = sg.randn(g, 2, 5, c["emb_dim"])
    out = gpt2_block(cfg=c, weights=w, in_features=x, train=True, seed=1)
    assert_close(out, o.block(x, w, c["n_heads"]), TOL, rule="drop_rate 0 in training mode")


#: Second inputs (conformance/hints.py): 5 of 8 or 4 of 6 positions (fewer
#: than context_length, so positions from 1 exist; more than one, so reversed
#: positions show), two layers, drop_rate 0.1 as in the test.
SECOND_MODELS = (
    sg.fixed_model(21, tokens=5, vocab=32, context=8, emb=8, heads=2, drop=0.1),
    sg.fixed_model(22, tokens=4, vocab=24, context=6, emb=16, heads=4, drop=0.1, qkv_bias=True),
)


#: The seed of the eval-mode calls: it changes nothing in eval mode; a dropout
#: left active draws its mask from it, as its replay does.
SEED = 0


def _observed(run, case, impl=None):
    """The implementation's logits, the known bugs replayed on ``case`` and
    (given ``impl``) the oracle's model with each of its parts swapped in."""
    out = run(cfg=case.cfg, weights=case.weights, in_idx=case.ids, seed=SEED)
    bugs = KNOWN_BUGS.thunks("gpt2.model", case.ids, case.weights, case.cfg)
    bugs += KNOWN_BUGS.thunks("gpt2.model/eval", case.ids, case.weights, case.cfg, SEED)
    if impl is None:
        return out, bugs

    def composite(**kw):
        return o.model(case.ids, case.weights, case.cfg, **kw)

    return out, bugs + hints.part_hints(swaps(impl, case.cfg, "gpt2.model", composite), composite, TOL)


@sg.budget(8)
@pytest.mark.spec("gpt2.model")
@given(case=sg.model_cases())
def test_model_logits_match_float64(gpt2_model, impl, case):
    """``tok_emb(ids) + pos_emb(arange)`` → blocks → final_norm → out_head, eval mode (drop_rate 0.1)."""
    out, bugs = _observed(gpt2_model, case, impl)
    assert_shape(out, (*case.ids.shape, case.cfg["vocab_size"]), rule="logits are (batch, tokens, vocab_size)")
    second = other(case, *SECOND_MODELS)
    assert_close(
        out,
        o.model(case.ids, case.weights, case.cfg),
        TOL,
        rule="GPTModel logits (float32 vs float64)",
        hints=bugs,
        again=lambda: _observed(gpt2_model, second, impl),
        context=f"ids{tuple(case.ids.shape)}, cfg {case.cfg}",
    )


@sg.budget(5)
@pytest.mark.spec("gpt2.model")
@given(case=sg.model_cases(batch=(1, 2)), data=st.data())
def test_model_prefix_gives_prefix_logits(gpt2_model, case, data):
    """In eval mode the logits of a prefix are the prefix of the logits (causality end to end)."""
    t = case.ids.shape[-1]
    k = data.draw(st.integers(1, t), label="prefix")
    whole = gpt2_model(cfg=case.cfg, weights=case.weights, in_idx=case.ids)
    part = gpt2_model(cfg=case.cfg, weights=case.weights, in_idx=case.ids[:, :k])
    assert_close(
        part, whole[:, :k], Tolerance(1e-5, 1e-5), rule=f"the first {k} tokens' logits do not depend on later ones"
    )


@pytest.mark.spec("gpt2.model")
def test_model_eval_is_deterministic(gpt2_model):
    """With drop_rate 0.5, two eval forward passes agree with each other and with the dropout-free oracle."""
    case = sg.fixed_model(3, drop=0.5)
    a = gpt2_model(cfg=case.cfg, weights=case.weights, in_idx=case.ids, seed=1)
    b = gpt2_model(cfg=case.cfg, weights=case.weights, in_idx=case.ids, seed=2)
    assert_close(a, b, Tolerance(0, 0), rule="eval mode is deterministic (dropout off)")
    assert_close(a, o.model(case.ids, case.weights, case.cfg), TOL, rule="eval mode: dropout is the identity")


@pytest.mark.spec("gpt2.model")
def test_model_drop_rate_zero_is_identity_in_training(gpt2_model):
    """With drop_rate 0, training mode gives the eval logits."""
    case = sg.fixed_model(4, drop=0.0)
    out = gpt2_model(cfg=case.cfg, weights=case.weights, in_idx=case.ids, train=True, seed=3)
    assert_close(out, o.model(case.ids, case.weights, case.cfg), TOL, rule="drop_rate 0 in training mode")


@pytest.mark.spec("gpt2.model")
def test_model_has_the_books_weights_untied(gpt2_model_info):
    """The book's weights (every key, shape) fit the model; out_head has no
    bias and its own weight (tied only by loading); LayerNorms start at scale 1, shift 0."""
    case = sg.fixed_model(0, qkv_bias=True)
    info = gpt2_model_info(cfg=case.cfg, weights=case.weights)
    assert info["weights_problem"] is None, info["weights_problem"]
    assert not info["tied"], "out_head.weight is tok_emb.weight: the head is tied at construction (SPEC §6.1: not tied)"
    for key, (lo, hi) in info["layernorm_init"].items():
        want = 1.0 if key.endswith("scale") else 0.0
        assert lo == hi == want, f"{key} starts in [{lo}, {hi}], expected all {want}"


@pytest.mark.spec("gpt2.model")
@strict
def test_model_longer_than_context_raises(gpt2_model):
    """STRICT: more ids than context_length is a clear error."""
    case = sg.fixed_model(5)
    ids = torch.zeros(1, case.cfg["context_length"] + 2, dtype=torch.long)
    with pytest.raises(Exception):  # noqa: B017
        gpt2_model(cfg=case.cfg, weights=case.weights, in_idx=ids)
