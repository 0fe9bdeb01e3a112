"""Tries to keep memory outside its address-space limit: fills /dev/shm
(a tmpfs of half the host's memory when bubblewrap's --dev makes it), and
writes files into /dev itself. Under the sandbox /dev/shm is a small tmpfs
of its own and /dev is read-only: run_silu answers right only when both held."""

import os

import torch

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "stores 1 GB in /dev/shm and writes into /dev", "spec": ["2.silu", "2.linear"]}
CHUNK = b"\1" * (1 << 20)


def _store(path: str, megabytes: int) -> int:
    """MB written to ``path`` before it was refused."""
    written = 0
    try:
        with open(path, "wb") as f:
            for _ in range(megabytes):
                f.write(CHUNK)
                f.flush()
                written += 1
    except OSError:
        pass
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return written


def run_silu(in_features):
    shm = _store("/dev/shm/lmspec-hostile-fill", 1024)
    dev = _store("/dev/lmspec-hostile-fill", 16)
    if shm >= 512 or dev > 0:  # not bounded: a wrong answer says so
        return torch.zeros_like(in_features)
    return in_features * torch.sigmoid(in_features)
