"""Training utilities (SPEC §3): loss, AdamW, cosine schedule, gradient
clipping, batching, checkpoints. The training loop lives in
``reference.training.loop``. Names are imported on first use, so that
``reference.training.config`` (what the command line needs) never imports
torch."""

import importlib
from typing import Any

_WHERE = {
    "CheckpointError": "checkpoint",
    "capture_rng_state": "checkpoint",
    "load_checkpoint": "checkpoint",
    "read_checkpoint": "checkpoint",
    "restore_rng_state": "checkpoint",
    "save_checkpoint": "checkpoint",
    "clip_grad_norm": "clipping",
    "InvalidDeviceError": "data",
    "get_batch": "data",
    "resolve_device": "data",
    "cross_entropy": "loss",
    "perplexity": "loss",
    "AdamW": "optimizer",
    "cosine_lr": "schedule",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
