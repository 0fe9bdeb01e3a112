"""Activation functions, and a max-heap the package uses elsewhere."""

import importlib.metadata

from heapdict import heapdict

__version__ = importlib.metadata.version("heap-tools")


def largest(counts: dict) -> object:
    """The key with the largest count (heapdict pops the smallest)."""
    heap = heapdict({key: -value for key, value in counts.items()})
    return heap.popitem()[0]
