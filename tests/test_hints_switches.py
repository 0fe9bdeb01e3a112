"""The single-switch catalog, generated from the registry: for every known bug
of cs336 §2 (conformance/cs336/oracles/nn_bugs.py: the ops, RoPE, SDPA, MHA,
the block, the LM and the accounting; not the ablations, whose replays take keywords), an
implementation that IS that switch (its replay, run in float32) goes through
the item's own check, failing on one pinned input and confirmed on the other;
the check must name exactly that cause: its own, and no other. Nobody picks
these bugs: every switch registered is one, the next one included.

Two switches exist only on inputs of their own (OTHER_INPUTS: a bfloat16
input, an input whose exp overflows) and are checked by the tests of those
inputs; here their replay must refuse the catalog's float32 input."""

import pytest
import torch
from switch_catalog import failure_causes

from lmspec.conformance.cs336 import test_attention, test_model, test_nn_ops, test_rope
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.oracles.nn_bugs import KNOWN_BUGS

#: (item, cause) -> the inputs that switch needs (its replay raises on others).
OTHER_INPUTS: dict[tuple[str, str], str] = {
    ("2.rmsnorm", "computed in bfloat16 without the float32 upcast"): "a bfloat16 input (test_rmsnorm_bfloat16...)",
    (
        "2.softmax",
        "no max subtraction before exp (exp overflows, or underflows to 0/0)",
    ): "an input whose exp overflows (test_softmax_huge...)",
}


def _sdpa(replay):
    def run(Q, K, V, mask=None):
        return replay(Q, K, V, mask).float()

    case = test_attention.SECOND_SDPA[0]
    return lambda: test_attention._check_sdpa(run, None, "cpu", case, torch.float32)


def _mha(replay):
    def run(d_model, num_heads, max_seq_len, theta, q_w, k_w, v_w, o_w, x, token_positions=None):
        return replay(x, q_w, k_w, v_w, o_w, num_heads, theta=theta, positions=token_positions).float()

    case = test_attention.SECOND_MHA[0]
    return lambda: test_attention._check_mha_rope(run, None, "cpu", case)


def _block(replay):
    def run(d_model, num_heads, d_ff, max_seq_len, theta, weights, x):
        return replay(x, weights, num_heads, theta).float()

    return lambda: test_model._check_block(run, None, "cpu", test_model.SECOND_BLOCKS[0])


def _lm(replay):
    def run(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights, ids):
        cfg = oracle.ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
        return replay(ids, weights, cfg).float()

    case = test_model.SECOND_LMS[0]
    return lambda: test_model._check_lm(run, None, "cpu", case, rule="LM", shape_rule="LM shape", context="")


def _linear(replay):
    def run(d_in, d_out, weights, x):
        return replay(x, weights).float()

    case = test_nn_ops.SECOND_LINEAR[0]
    return lambda: test_nn_ops._check_linear(run, "cpu", case, test_nn_ops.tol.LINEAR_F32, "Linear")


def _embedding(replay):
    def run(vocab_size, d_model, weights, ids):
        return replay(weights, ids).float()

    return lambda: test_nn_ops._check_embedding(run, "cpu", test_nn_ops.SECOND_EMBEDDING[0])


def _rmsnorm(replay):
    def run(d_model, eps, weights, x):
        return replay(x, weights, eps).float()

    return lambda: test_nn_ops._check_rmsnorm(run, "cpu", test_nn_ops.SECOND_RMSNORM[1])


def _silu(replay):
    return lambda: test_nn_ops._check_silu(lambda x: replay(x).float(), "cpu", test_nn_ops.SECOND_SILU[0])


def _swiglu(replay):
    def run(d_model, d_ff, w1, w2, w3, x):
        return replay(x, w1, w2, w3).float()

    return lambda: test_nn_ops._check_swiglu(run, "cpu", test_nn_ops.SECOND_SWIGLU[0])


def _softmax(replay):
    x, dim = test_nn_ops.SECOND_SOFTMAX[0]
    second = tuple(test_nn_ops.SECOND_SOFTMAX[1])
    return lambda: test_nn_ops._check_softmax(lambda x, dim: replay(x, dim).float(), "cpu", x, dim, "softmax", second)


def _rope(replay):
    def run(d_k, theta, max_seq_len, x, positions):
        return replay(x, positions, theta).float()

    return lambda: test_rope._check_rope(run, "cpu", test_rope.SECOND_ROPE[0])


def _accounting(replay):
    cfg = test_model.SECOND_ACCOUNTING[0]

    def run(*args):
        return replay(oracle.ModelConfig(*args))

    def check():  # the switch's kind (count or FLOPs) is the one its replay returns
        if isinstance(replay(cfg), int):
            test_model._check_count_parameters(run, cfg)
        else:
            test_model._check_forward_flops(run, cfg, oracle.forward_flops(cfg), "FLOPs")

    return check


CHECKS = {
    "2.linear": _linear,
    "2.embedding": _embedding,
    "2.rmsnorm": _rmsnorm,
    "2.silu": _silu,
    "2.swiglu": _swiglu,
    "2.softmax": _softmax,
    "2.rope": _rope,
    "2.sdpa": _sdpa,
    "2.mha": _mha,
    "2.block": _block,
    "2.lm": _lm,
    "2.accounting": _accounting,
}
SWITCHES = [b for b in KNOWN_BUGS if b.item in CHECKS]


def test_every_composite_has_switches():
    assert {b.item for b in SWITCHES} == set(CHECKS)


@pytest.mark.parametrize("bug", SWITCHES, ids=[f"{b.item}: {b.cause[:40]}" for b in SWITCHES])
def test_a_switch_gets_exactly_its_cause(bug):
    check = CHECKS[bug.item](bug.replay)
    if (bug.item, bug.cause) in OTHER_INPUTS:
        with pytest.raises(ValueError):
            check()
        return
    assert failure_causes(check) == [bug.cause]
