"""SPEC §6.2 extended items (optional, "not provided" when absent): ALiBi
biases, local attention masks, RoPE on Q and K (§2's rule, against the float64
oracle of conformance/cs336/oracles/nn.py) and gradient checkpointing (the
encoder layer's output and gradients with ``checkpoint=True`` equal its own
without, and torch's float64 layer's)."""

import pytest
import torch

from lmspec.conformance.asserts import assert_close, assert_equal, assert_shape
from lmspec.conformance.cs336.oracles import nn as nn_oracle
from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec.conventions import conventions, without_attention_bias  # noqa: F401  (fixture)
from lmspec.conformance.encdec.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import confirmed, likely_causes, other


def _observed_alibi(run_alibi_bias, heads, n):
    """The implementation's bias on and below the diagonal, and the known bugs' there."""
    out = torch.as_tensor(run_alibi_bias(num_heads=heads, seq_len=n)).detach().cpu().double()
    lower = torch.ones(n, n, dtype=torch.bool).tril().expand(heads, n, n)
    bugs = [(cause, lambda f=f: f()[lower]) for cause, f in KNOWN_BUGS.thunks("encdec.alibi", heads, n)]
    return out, lower, bugs


SECOND_ALIBI = ((2, 7), (16, 4))


@pytest.mark.spec("encdec.alibi")
@pytest.mark.parametrize(("heads", "n"), [(8, 6), (4, 5)])
def test_alibi_bias(run_alibi_bias, heads, n):
    """bias[h, i, j] = −m_h (i − j) for j ≤ i, slopes m_h = 2^(−8k/h), k = 1..h."""
    out, lower, bugs = _observed_alibi(run_alibi_bias, heads, n)
    assert_shape(out, (heads, n, n), rule="ALiBi bias is (num_heads, seq_len, seq_len)")

    def second():
        again, again_lower, again_bugs = _observed_alibi(run_alibi_bias, *other((heads, n), *SECOND_ALIBI))
        return again[again_lower], again_bugs

    assert_close(
        out[lower],
        o.alibi_bias(heads, n)[lower],
        c.TOL_FORMULA,
        rule="ALiBi −m_h (i − j) on and below the diagonal",
        hints=bugs,
        again=second,
    )


def _local_causes(run_local_attention_mask, n: int, window: int, out=None) -> list[str]:
    """The known bugs whose mask is the implementation's (``out``, or a fresh run)."""
    if out is None:
        out = torch.as_tensor(run_local_attention_mask(seq_len=n, window=window)).detach().cpu().bool()
    return [
        cause
        for cause, replay in KNOWN_BUGS.thunks("encdec.local_attention", n, window)
        if out.shape == (n, n) and torch.equal(out, replay())
    ]


#: second inputs: a longer sequence over a wider window, a window of 2 over 8
SECOND_LOCAL = ((9, 4), (8, 2))


@pytest.mark.spec("encdec.local_attention")
@pytest.mark.parametrize(("n", "window"), [(6, 2), (7, 3), (5, 1)])
def test_local_attention_mask(run_local_attention_mask, n, window):
    """Query i sees key j when i − window < j ≤ i (True = may attend)."""
    out = torch.as_tensor(run_local_attention_mask(seq_len=n, window=window)).detach().cpu().bool()
    expected = o.local_mask(n, window)
    causes = []
    if out.shape != expected.shape or not torch.equal(out, expected):
        causes = confirmed(
            _local_causes(run_local_attention_mask, n, window, out),
            lambda: _local_causes(run_local_attention_mask, *other((n, window), *SECOND_LOCAL)),
        )
    assert_equal(out.tolist(), expected.tolist(), rule=f"local attention mask, window {window}", causes=causes)


def _rope_case(seed: int, shape: tuple[int, ...], theta: float):
    """Input and per-token positions (from 0..15, shuffled); a 4-D input gets (batch, 1, seq) positions."""
    g = c.generator(seed)
    x = c.randn(g, *shape)
    positions = torch.stack([torch.randperm(16, generator=g)[: shape[-2]] for _ in range(shape[0])])
    return x, positions.unsqueeze(1) if len(shape) == 4 else positions, theta


def _observed_rope(run_rotary_embedding, case):
    x, positions, theta = case
    out = run_rotary_embedding(
        d_k=x.shape[-1], theta=theta, max_seq_len=16, in_query_or_key=x.clone(), token_positions=positions.clone()
    )
    return out, KNOWN_BUGS.thunks("encdec.rope", *case)


SECOND_ROPE = (_rope_case(910, (2, 7, 12), 10000.0), _rope_case(911, (2, 2, 4, 8), 1000.0))


@pytest.mark.spec("encdec.rope")
@pytest.mark.parametrize(("shape", "theta"), [((2, 6, 8), 10000.0), ((2, 3, 5, 16), 500.0)])
def test_rope(run_rotary_embedding, shape, theta):
    """Pair k = (x_2k, x_2k+1) at position i rotated by θ_{i,k} = i / theta^(2k/d_k)
    (SPEC §2), positions given per token (not 0..seq-1)."""
    case = _rope_case(900 + len(shape), shape, theta)
    positions = case[1]
    out, bugs = _observed_rope(run_rotary_embedding, case)
    assert_shape(out, shape, rule="RoPE keeps the input's shape")
    assert_close(
        out,
        nn_oracle.rope(*case),
        c.TOL_FORMULA,
        rule="RoPE rotates adjacent pairs (x_2k, x_2k+1) by i / theta^(2k/d_k) (float32 vs float64)",
        hints=bugs,
        again=lambda: _observed_rope(run_rotary_embedding, other(case, *SECOND_ROPE)),
        context=f"x{tuple(shape)}, theta={theta}, positions {positions.tolist()}",
    )


def _gradients(run, d, h, d_ff, w, x, mask, grad_output, checkpoint):
    names = ("weights", "in_features", "src_mask", "grad_output")
    out, grads = run(
        d_model=d,
        num_heads=h,
        d_ff=d_ff,
        checkpoint=checkpoint,
        **dict(zip(names, c.fresh(w, x, mask, grad_output))),
    )
    return torch.as_tensor(out).detach().cpu().double(), {
        k: None if v is None else torch.as_tensor(v).detach().cpu().double() for k, v in dict(grads).items()
    }


def _checkpoint_case(seed: int, conv):
    """(d_model, heads, d_ff, weights, x, src_mask, grad_output) of a checkpointing test."""
    d, h, d_ff = (16, 4, 32) if seed < 2 else (24, 3, 48)
    g = c.generator(950 + seed)
    w = without_attention_bias(c.encoder_layer_weights(g, d, d_ff), conv)
    x = c.randn(g, 2, 7, d)
    mask = c.source_mask(c.tokens(g, [7, 5], 7, 11))
    return d, h, d_ff, w, x, mask, c.randn(g, 2, 7, d)


def _same_run(got, want) -> bool:
    """Output and gradients alike within the layer tolerance (a missing gradient as zeros)."""
    (out, grads), (ref_out, ref_grads) = got, want
    tol = c.TOL_LAYER

    def close(a, b) -> bool:
        a = torch.zeros_like(b) if a is None else a
        return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol.rtol, atol=tol.atol))

    return close(out, ref_out) and all(close(grads.get(k), v) for k, v in ref_grads.items())


def _checkpoint_causes(run, conv, seed: int, observed=None) -> list[str]:
    """The known bugs whose output and gradients are the implementation's with
    checkpoint=True (``observed``, or a fresh run) on the case of ``seed``."""
    case = _checkpoint_case(seed, conv)
    if observed is None:
        observed = _gradients(run, *case, True)
    return [c for c, replay in KNOWN_BUGS.thunks("encdec.checkpointing", *case, conv) if _same_run(observed, replay())]


#: the second input of the checkpointing test: d_model 24 over 3 heads
SECOND_CHECKPOINT = 2


@pytest.mark.spec("encdec.checkpointing")
@pytest.mark.parametrize("seed", [0, 1])
def test_checkpointing_same_output_and_gradients(run_encoder_layer_gradients, conventions, seed):  # noqa: F811
    """The encoder layer with checkpoint=True gives the output and the gradients
    (w.r.t. the input and every weight) of checkpoint=False, and both equal
    torch's float64 TransformerEncoderLayer with the same weights."""
    case = _checkpoint_case(seed, conventions)
    d, h, d_ff, _, x, _, _ = case
    plain = _gradients(run_encoder_layer_gradients, *case, False)
    ckpt = _gradients(run_encoder_layer_gradients, *case, True)
    ref_out, ref_grads = o.encoder_layer_gradients(*case, conventions)
    causes = []
    if _same_run(plain, (ref_out, ref_grads)) and not _same_run(ckpt, (ref_out, ref_grads)):
        causes = confirmed(
            _checkpoint_causes(run_encoder_layer_gradients, conventions, seed, ckpt),
            lambda: _checkpoint_causes(run_encoder_layer_gradients, conventions, SECOND_CHECKPOINT),
        )
    context = f"d_model={d}, heads={h}, d_ff={d_ff}, x{tuple(x.shape)}, loss (output · grad_output).sum()"
    for label, (out, grads), named in (("checkpoint=False", plain, []), ("checkpoint=True", ckpt, causes)):
        assert_close(out, ref_out, c.TOL_LAYER, rule=f"output with {label} vs torch's layer (float64)", context=context)
        for key, ref in ref_grads.items():
            got = grads.get(key)
            assert got is not None, (
                f"no gradient for {key!r} with {label} (w.r.t. the input and every weight)" + likely_causes(named)
            )
            assert_close(
                got,
                ref,
                c.TOL_LAYER,
                rule=f"d loss / d {key} with {label} vs torch's layer",
                causes=named,
                context=context,
            )
    assert_close(ckpt[0], plain[0], c.TOL_SAME, rule="checkpointing changes the output", context=context)
    for key in ref_grads:
        assert_close(
            ckpt[1][key], plain[1][key], c.TOL_SAME, rule=f"checkpointing changes d loss / d {key}", context=context
        )
