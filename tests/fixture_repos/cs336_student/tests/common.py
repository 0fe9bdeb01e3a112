from __future__ import annotations

import pathlib
from functools import lru_cache

import torch

FIXTURES_PATH = (pathlib.Path(__file__).resolve().parent) / "fixtures"


@lru_cache
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for every byte value (bytes that
    print fine map to themselves, the other 68 to chr(256 + n))."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return mapping


# --- my helpers for adapters.py ------------------------------------------------
def pop_prefixed(weights: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Take every entry whose key starts with `prefix` out of `weights` and
    return them with the prefix stripped (so I can see what is left over)."""
    keys = [k for k in weights if k.startswith(prefix)]
    return {k[len(prefix) :]: weights.pop(k) for k in keys}


def module_device(tensor: torch.Tensor) -> torch.device:
    return tensor.device
