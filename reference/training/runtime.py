"""What a training run needs around its loop: deterministic algorithms and
thread counts for the run's duration, resuming from a checkpoint, the JSONL
log, a graceful Ctrl-C, atomic copies of checkpoints and the loss plot."""

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lmspec.reference.training.checkpoint import load_checkpoint, read_checkpoint
from lmspec.reference.training.config import TrainConfig

__all__ = [
    "GracefulInterrupt",
    "JsonlLog",
    "atomic_copy",
    "checkpoint_to_resume",
    "cpu_threads",
    "deterministic_algorithms",
    "plot_quietly",
    "resume_from",
]

PLOT_NAME = "loss.png"


@contextlib.contextmanager
def deterministic_algorithms(enabled: bool, device: torch.device) -> Iterator[None]:
    """``torch.use_deterministic_algorithms(True)`` for the run, then the caller's setting.

    subtle: on CPU the backward of the embedding lookup (an accumulating
    ``index_put_``) adds rows in a thread-dependent order, so two identical runs
    differ in the last bit after one step; deterministic mode sorts instead.
    Elsewhere ops without a deterministic kernel only warn (``warn_only``).
    """
    if not enabled:
        yield
        return
    previous = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    if device.type == "cuda":  # cuBLAS reads it when its first handle is created
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


@contextlib.contextmanager
def cpu_threads(threads: int | None) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` for the run, then the caller's count.

    Small models gain little from more threads, and on a shared machine idle
    threads spin: measured on 2 busy cores, the 0.4M-parameter smoke model used
    ~5x the CPU time per step with 2 threads as with 1, at the same speed.
    """
    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def checkpoint_to_resume(config: TrainConfig) -> Path | None:
    if config.resume is None:
        return None
    if config.resume == "auto":
        return config.checkpoint_path if config.checkpoint_path.exists() else None
    path = Path(config.resume)
    if not path.is_file():
        raise FileNotFoundError(f"resume checkpoint {str(path)!r} does not exist")
    return path


def resume_from(
    path: Path,
    config: TrainConfig,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch_rng: np.random.Generator,
) -> tuple[int, float, int]:
    """Load ``path`` into model/optimizer/RNGs; return (step, elapsed_s, tokens_seen)."""
    payload = read_checkpoint(path)
    metadata = payload.get("metadata") or {}
    saved_model = (metadata.get("config") or {}).get("model")
    if isinstance(saved_model, dict):
        wanted = config.to_dict()["model"]
        diffs = [
            f"{k}: checkpoint {saved_model.get(k)!r}, config {v!r}"
            for k, v in wanted.items()
            if saved_model.get(k) != v
        ]
        if diffs:
            raise ValueError(f"cannot resume from {str(path)!r}: the model differs ({'; '.join(diffs)})")
    step = load_checkpoint(path, model, optimizer, restore_rng="rng" in payload)
    # the config, not the checkpoint, owns the hyperparameters (lr is set every step)
    for group in optimizer.param_groups:
        group.update(betas=config.betas, eps=config.eps, weight_decay=config.weight_decay)
    if "data_rng" in metadata:
        batch_rng.bit_generator.state = metadata["data_rng"]
    else:
        warnings.warn(
            f"{str(path)!r} holds no batch-sampler state: the resumed run will see "
            "different batches than an uninterrupted one",
            stacklevel=3,
        )
    tokens = metadata.get("tokens_seen", step * config.batch_size * config.model.context_length)
    return step, float(metadata.get("elapsed_s", 0.0)), int(tokens)


class JsonlLog:
    """Append-only JSONL log; on resume, records after the checkpoint's step are
    dropped (they belong to the lost part of the interrupted run)."""

    def __init__(self, path: Path, keep_through: int | None) -> None:
        self.path = path
        kept: list[str] = []
        if keep_through is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(json.JSONDecodeError, TypeError, KeyError):
                    if line.strip() and json.loads(line)["step"] <= keep_through:
                        kept.append(line + "\n")
        path.write_text("".join(kept), encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


class GracefulInterrupt:
    """First SIGINT: set ``requested`` (the loop finishes its step and saves);
    second: raise KeyboardInterrupt at once. Only the main thread can install
    signal handlers; elsewhere this does nothing (Ctrl-C raises as usual)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.requested = False
        self._say = say
        self._previous: Any = None

    def __enter__(self) -> "GracefulInterrupt":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self._say("interrupt: finishing this step and saving a checkpoint (Ctrl-C again to abort)")

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def atomic_copy(src: Path, dst: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def plot_quietly(config: TrainConfig, log_path: Path, out_dir: Path) -> Path | None:
    if not config.plot:
        return None
    from lmspec.reference.plotting import plot_loss_curve

    try:
        return plot_loss_curve(log_path, out_dir / PLOT_NAME, title=f"{config.out_dir}")
    except Exception as exc:  # a plot must never cost the run its result
        warnings.warn(f"could not write the loss plot: {exc}", stacklevel=2)
        return None
