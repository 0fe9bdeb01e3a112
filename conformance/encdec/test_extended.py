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
from lmspec.conformance.encdec.conventions import conventions  # noqa: F401  (fixture)


@pytest.mark.spec("encdec.alibi")
@pytest.mark.parametrize(("heads", "n"), [(8, 6), (4, 5)])
def test_alibi_bias(run_alibi_bias, heads, n):
    """bias[h, i, j] = −m_h (i − j) for j ≤ i, slopes m_h = 2^(−8k/h), k = 1..h."""
    out = torch.as_tensor(run_alibi_bias(num_heads=heads, seq_len=n)).detach().cpu().double()
    assert_shape(out, (heads, n, n), rule="ALiBi bias is (num_heads, seq_len, seq_len)")
    slopes = torch.tensor([2.0 ** (-8.0 * k / heads) for k in range(1, heads + 1)], dtype=torch.float64)
    pos = torch.arange(n, dtype=torch.float64)
    expected = -slopes.view(-1, 1, 1) * (pos.view(-1, 1) - pos)
    lower = torch.ones(n, n, dtype=torch.bool).tril().expand(heads, n, n)
    assert_close(
        out[lower],
        expected[lower],
        c.TOL_FORMULA,
        rule="ALiBi −m_h (i − j) on and below the diagonal",
        hints=[("slopes 2^(−8(k−1)/h) (k from 0)", lambda: (expected * (2.0 ** (8.0 / heads)))[lower])],
    )


@pytest.mark.spec("encdec.local_attention")
@pytest.mark.parametrize(("n", "window"), [(6, 2), (7, 3), (5, 1)])
def test_local_attention_mask(run_local_attention_mask, n, window):
    """Query i sees key j when i − window < j ≤ i (True = may attend)."""
    out = torch.as_tensor(run_local_attention_mask(seq_len=n, window=window)).detach().cpu().bool()
    i = torch.arange(n).view(-1, 1)
    j = torch.arange(n)
    expected = (j <= i) & (j > i - window)
    assert_equal(out.tolist(), expected.tolist(), rule=f"local attention mask, window {window}")


@pytest.mark.spec("encdec.rope")
@pytest.mark.parametrize(("shape", "theta"), [((2, 6, 8), 10000.0), ((2, 3, 5, 16), 500.0)])
def test_rope(run_rotary_embedding, shape, theta):
    """Pair k = (x_2k, x_2k+1) at position i rotated by θ_{i,k} = i / theta^(2k/d_k)
    (SPEC §2), positions given per token (not 0..seq-1)."""
    g = c.generator(900 + len(shape))
    x = c.randn(g, *shape)
    d_k, seq = shape[-1], shape[-2]
    max_seq_len = 16
    positions = torch.stack([torch.randperm(max_seq_len, generator=g)[:seq] for _ in range(shape[0])])
    if len(shape) == 4:
        positions = positions.unsqueeze(1)  # (batch, 1, seq) against (batch, heads, seq, d_k)
    out = run_rotary_embedding(
        d_k=d_k, theta=theta, max_seq_len=max_seq_len, in_query_or_key=x.clone(), token_positions=positions.clone()
    )
    assert_shape(out, shape, rule="RoPE keeps the input's shape")
    assert_close(
        out,
        nn_oracle.rope(x, positions, theta),
        c.TOL_FORMULA,
        rule="RoPE rotates adjacent pairs (x_2k, x_2k+1) by i / theta^(2k/d_k) (float32 vs float64)",
        hints=[
            ("pairs (x_k, x_k+d/2) (rotate-half)", lambda: nn_oracle.rope(x, positions, theta, pairs="half")),
            ("frequency exponent k/d_k instead of 2k/d_k", lambda: nn_oracle.rope(x, positions, theta, exponent=1.0)),
            ("inverse rotation (sin sign flipped)", lambda: nn_oracle.rope(x, positions, theta, sign=-1.0)),
        ],
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


@pytest.mark.spec("encdec.checkpointing")
@pytest.mark.parametrize("seed", [0, 1])
def test_checkpointing_same_output_and_gradients(run_encoder_layer_gradients, conventions, seed):  # noqa: F811
    """The encoder layer with checkpoint=True gives the output and the gradients
    (w.r.t. the input and every weight) of checkpoint=False, and both equal
    torch's float64 TransformerEncoderLayer with the same weights."""
    d, h, d_ff = 16, 4, 32
    g = c.generator(950 + seed)
    w = c.encoder_layer_weights(g, d, d_ff)
    x = c.randn(g, 2, 7, d)
    mask = c.source_mask(c.tokens(g, [7, 5], 7, 11))
    grad_output = c.randn(g, 2, 7, d)
    plain = _gradients(run_encoder_layer_gradients, d, h, d_ff, w, x, mask, grad_output, False)
    ckpt = _gradients(run_encoder_layer_gradients, d, h, d_ff, w, x, mask, grad_output, True)
    ref_out, ref_grads = o.encoder_layer_gradients(d, h, d_ff, w, x, mask, grad_output, conventions)
    context = f"d_model={d}, heads={h}, d_ff={d_ff}, x{tuple(x.shape)}, loss (output · grad_output).sum()"
    for label, (out, grads) in (("checkpoint=False", plain), ("checkpoint=True", ckpt)):
        assert_close(out, ref_out, c.TOL_LAYER, rule=f"output with {label} vs torch's layer (float64)", context=context)
        for key, ref in ref_grads.items():
            got = grads.get(key)
            assert got is not None, f"no gradient for {key!r} with {label} (w.r.t. the input and every weight)"
            assert_close(got, ref, c.TOL_LAYER, rule=f"d loss / d {key} with {label} vs torch's layer", context=context)
    assert_close(ckpt[0], plain[0], c.TOL_SAME, rule="checkpointing changes the output", context=context)
    for key in ref_grads:
        assert_close(
            ckpt[1][key], plain[1][key], c.TOL_SAME, rule=f"checkpointing changes d loss / d {key}", context=context
        )
