"""The second inputs of the nn-op and RoPE tests (conformance/cs336/test_nn_ops.py,
test_rope.py) against the known bugs registered in oracles/nn_bugs.py: on each
second input every replay differs from the oracle and from every other replay,
so a cause confirmed there is told apart from the others (conformance/hints.py).
And the reason for them: a small input alone can name a wrong cause."""

import itertools

import pytest
import torch

from lmspec.conformance import hints
from lmspec.conformance import tolerances as tol
from lmspec.conformance.asserts import describe_mismatch
from lmspec.conformance.cs336 import test_nn_ops as ops
from lmspec.conformance.cs336 import test_rope as rope
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.oracles.nn_bugs import KNOWN_BUGS

BF16 = torch.bfloat16


def _softmax_seconds(transform, dtype):
    return [(transform(x).to(dtype), dim) for x, dim in ops.SECOND_SOFTMAX]


# (item, second inputs as the oracle's arguments, oracle, tolerance of the test that uses them)
SECONDS = {
    "linear": ("2.linear", ops.SECOND_LINEAR, oracle.linear, tol.LINEAR_F32),
    "linear, integer": ("2.linear", ops.SECOND_LINEAR_INTEGER, oracle.linear, tol.EXACT),
    "embedding": ("2.embedding", ops.SECOND_EMBEDDING, oracle.embedding, tol.EXACT),
    "rmsnorm": ("2.rmsnorm", ops.SECOND_RMSNORM, oracle.rmsnorm, tol.RMSNORM_F32),
    "rmsnorm, bfloat16": (
        "2.rmsnorm",
        [(x.to(BF16), g, eps) for x, g, eps in ops.SECOND_RMSNORM],
        lambda x, g, eps: oracle.rmsnorm(x, g, eps).to(BF16),
        tol.RMSNORM_BF16,
    ),
    "silu": ("2.silu", [(x,) for x in ops.SECOND_SILU], oracle.silu, tol.SILU_F32),
    "silu, bfloat16": ("2.silu", [(x.to(BF16),) for x in ops.SECOND_SILU], oracle.silu, tol.SILU_BF16),
    "swiglu": ("2.swiglu", ops.SECOND_SWIGLU, oracle.swiglu, tol.SWIGLU_F32),
    "softmax": ("2.softmax", _softmax_seconds(lambda x: x, torch.float32), oracle.softmax, None),
    "softmax, bfloat16": ("2.softmax", _softmax_seconds(lambda x: x, BF16), oracle.softmax, None),
    **{
        f"softmax({name}), {dtype}": ("2.softmax", _softmax_seconds(huge, dtype), oracle.softmax, None)
        for name, huge in ops.HUGE.items()
        for dtype in (torch.float32, BF16)
    },
    "rope": ("2.rope", [(c.x, c.positions, c.theta) for c in rope.SECOND_ROPE], oracle.rope, tol.ROPE_F32),
    "rope, basis vectors": (
        "2.rope",
        [(*rope._basis(*second), 10000.0) for second in rope.SECOND_BASIS],
        oracle.rope,
        tol.ROPE_F32,
    ),
}


@pytest.mark.parametrize("name", list(SECONDS))
def test_second_inputs_tell_known_bugs_apart(name):
    """Every replay that applies to a second input (a bfloat16 upcast needs a
    bfloat16 input, a missing max shift an exp out of range) gives neither the
    oracle's output nor another replay's."""
    item, seconds, expected, tolerance = SECONDS[name]
    for args in seconds:
        tolerance_here = tolerance or ops._softmax_tol(args[0])
        replays = {}
        for cause, replay in KNOWN_BUGS.thunks(item, *args):
            try:
                replays[cause] = replay()
            except ValueError:  # the bug does not show on this input
                continue
            assert describe_mismatch(replays[cause], expected(*args), tolerance_here), f"{cause}: as the oracle"
        for (a, out_a), (b, out_b) in itertools.combinations(replays.items(), 2):
            assert describe_mismatch(out_a, out_b, tolerance_here), f"{a} and {b} alike"


def test_every_known_bug_shows_on_some_second_input():
    shown = set()
    for item, seconds, _, _ in SECONDS.values():
        for args in seconds:
            for cause, replay in KNOWN_BUGS.thunks(item, *args):
                try:
                    replay()
                except ValueError:
                    continue
                shown.add((item, cause))
    items = {item for item, *_ in SECONDS.values()}
    assert {(b.item, b.cause) for b in KNOWN_BUGS if b.item in items} <= shown


def _reproducing(item, out, args, tolerance):
    return [c for c, make in KNOWN_BUGS.thunks(item, *args) if describe_mismatch(out, make(), tolerance) is None]


def test_one_pair_at_position_one_looks_like_positions_ignored():
    """The handout's k = 1..d/2 kept in theta^(2k/d) turns a single pair at
    position 1 by 1e-4 rad: within tolerance of not turning, so that input
    alone names "token_positions ignored" too; the second input (d_k = 8,
    position 5) keeps only the real cause (tests/mutants/nn_rope_handout_k_from_one.py)."""
    k_from_one = next(c for c in KNOWN_BUGS.causes("2.rope") if "k = 1..d_k/2" in c)
    replay = KNOWN_BUGS.causes("2.rope")[k_from_one]

    def causes(d_half, position):
        basis, positions = rope._basis(d_half, position)
        return _reproducing("2.rope", replay(basis, positions, 10000.0), (basis, positions, 10000.0), tol.ROPE_F32)

    first = causes(1, 1)
    assert set(first) == {k_from_one, "token_positions ignored (used 0..seq-1)"}
    assert hints.confirmed(first, lambda: causes(*rope.SECOND_BASIS[0])) == [k_from_one]


def test_vocab_two_looks_up_id_plus_one_and_minus_one_alike():
    """With two rows, row id-1 is row id+1: the STRICT embedding test's
    smallest failing input names both; the second input (vocab 7) only one."""
    w, ids = torch.randn(2, 1, generator=torch.Generator().manual_seed(0)), torch.tensor([0])
    one_before = w[(ids - 1) % 2].double()
    first = _reproducing("2.embedding", one_before, (w, ids), tol.EXACT)
    assert len(first) == 2
    w2, ids2 = ops.SECOND_EMBEDDING[0]
    second = _reproducing("2.embedding", w2[(ids2 - 1) % 7].double(), (w2, ids2), tol.EXACT)
    assert hints.confirmed(first, lambda: second) == ["looks up row id-1 (off by one)"]
