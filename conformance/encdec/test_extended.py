"""SPEC §6.2 extended items (optional, "not provided" when absent): ALiBi
biases and local attention masks."""

import pytest
import torch

from lmspec.conformance.asserts import assert_close, assert_equal, assert_shape
from lmspec.conformance.encdec import cases as c


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
