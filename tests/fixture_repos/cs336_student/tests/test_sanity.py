"""My own quick checks while developing (the course tests live next to this file)."""

import torch

from .adapters import run_cross_entropy, run_softmax


def test_softmax_rows_sum_to_one():
    x = torch.randn(3, 5) * 100
    assert torch.allclose(run_softmax(x, dim=-1).sum(-1), torch.ones(3))


def test_cross_entropy_uniform_logits():
    logits = torch.zeros(2, 10)
    targets = torch.tensor([1, 7])
    assert torch.isclose(run_cross_entropy(logits, targets), torch.log(torch.tensor(10.0)))


def test_small_batch_is_shifted(small_batch):
    x, y = small_batch
    assert torch.equal(x[:, 1:], y[:, :-1])
