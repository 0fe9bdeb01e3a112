"""Training utilities (SPEC §3): loss, AdamW, cosine schedule, gradient
clipping, batching, checkpoints. The training loop lives in
``reference.training.loop`` and is not imported here."""

from lmspec.reference.training.checkpoint import (
    CheckpointError,
    capture_rng_state,
    load_checkpoint,
    read_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from lmspec.reference.training.clipping import clip_grad_norm
from lmspec.reference.training.data import InvalidDeviceError, get_batch, resolve_device
from lmspec.reference.training.loss import cross_entropy, perplexity
from lmspec.reference.training.optimizer import AdamW
from lmspec.reference.training.schedule import cosine_lr

__all__ = [
    "AdamW",
    "CheckpointError",
    "InvalidDeviceError",
    "capture_rng_state",
    "clip_grad_norm",
    "cosine_lr",
    "cross_entropy",
    "get_batch",
    "load_checkpoint",
    "perplexity",
    "read_checkpoint",
    "resolve_device",
    "restore_rng_state",
    "save_checkpoint",
]
