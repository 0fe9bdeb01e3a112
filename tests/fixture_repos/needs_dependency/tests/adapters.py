from heap_tools import largest
from heap_tools.activations import silu, softmax


def run_silu(in_features):
    return silu(in_features)


def run_softmax(in_features, dim):
    assert largest({"a": 1, "b": 3}) == "b"
    return softmax(in_features, dim)
