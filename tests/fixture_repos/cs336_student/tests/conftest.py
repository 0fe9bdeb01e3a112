import numpy as np
import pytest
import torch

from .common import FIXTURES_PATH

# (inputs, targets) pair from get_batch
type Batch = tuple[torch.Tensor, torch.Tensor]


def first[T](items: list[T]) -> T:
    return items[0]


@pytest.fixture
def fixtures_path():
    return FIXTURES_PATH


@pytest.fixture
def d_model():
    return 64


@pytest.fixture
def n_heads():
    return 4


@pytest.fixture
def in_embeddings(d_model):
    torch.manual_seed(4)
    return torch.randn(4, 12, d_model)


@pytest.fixture
def token_dataset() -> np.ndarray:
    return np.arange(0, 100)


@pytest.fixture
def small_batch(token_dataset) -> Batch:
    from .adapters import run_get_batch

    return run_get_batch(token_dataset, 4, 8, "cpu")
