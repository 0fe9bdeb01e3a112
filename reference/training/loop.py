"""The training loop (SPEC §3 "Training loop"; a reference item, not an adapter item).

``train(config)`` runs AdamW with a warmup + cosine schedule and global
gradient clipping on batches sampled from memory-mapped token arrays, logs
train/validation losses as JSONL, checkpoints to the user's path, and resumes.

Exact resume: update ``t`` (1-based) draws its batch from a NumPy generator
seeded with ``config.seed`` and uses ``lr = cosine_lr(t, ...)``. A checkpoint
stores the model, the optimizer, the global RNGs and the generator's state, so
a run resumed from step ``k`` ends with the same parameters, bit for bit, as
one never interrupted (same device, same torch build and thread count).

Never losing work: checkpoints are written atomically (``save_checkpoint``).
The first Ctrl-C lets the current step finish, saves a checkpoint and returns
with ``interrupted=True``; a second one stops at once. Any other exception
raised outside the optimizer update (a NaN loss, an out-of-memory error in the
forward pass) also saves the state of the last completed step before it
propagates.
"""

import contextlib
import json
import math
import os
import shutil
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from tqdm.auto import tqdm

from lmspec.reference.nn import TransformerLM
from lmspec.reference.training.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from lmspec.reference.training.clipping import clip_grad_norm
from lmspec.reference.training.config import TrainConfig
from lmspec.reference.training.data import get_batch, resolve_device
from lmspec.reference.training.loss import cross_entropy
from lmspec.reference.training.optimizer import AdamW
from lmspec.reference.training.schedule import cosine_lr

__all__ = ["TrainResult", "evaluate", "open_tokens", "train"]

TokenArray = npt.NDArray[np.integer]

LOG_NAME = "log.jsonl"
PLOT_NAME = "loss.png"
CONFIG_NAME = "config.json"
_SCAN_CHUNK = 1 << 24  # tokens per chunk when scanning a memmap for its largest id


@dataclass(frozen=True)
class TrainResult:
    """What a finished (or interrupted) run leaves behind."""

    step: int  # optimizer steps completed (counting those before a resume)
    start_step: int  # the step the run started from (0, or the resumed checkpoint's)
    train_loss: float | None  # mean training loss of the last logging window
    val_loss: float | None  # the last validation loss (None without val_data)
    tokens_seen: int
    elapsed_s: float  # wall-clock seconds of training, including earlier resumed segments
    checkpoint: Path
    log_path: Path
    plot_path: Path | None
    interrupted: bool


def open_tokens(path: str | os.PathLike, vocab_size: int, *, name: str = "data") -> TokenArray:
    """Memory-map a 1-D token array: ``.npy`` via ``np.load(mmap_mode="r")``, any
    other file as raw ``uint16`` (``uint32`` when ``vocab_size > 65,536``).

    The whole array is scanned once, in chunks, for its largest id, so a data
    file that does not match the model's vocabulary fails here with a clear
    message instead of deep inside the embedding.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not 1-D integers, fewer than 2 tokens, or an id >= vocab_size.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{name} file {str(p)!r} does not exist")
    try:
        if p.suffix == ".npy":
            tokens = np.load(p, mmap_mode="r")
        else:
            tokens = np.memmap(p, dtype=np.uint16 if vocab_size <= 65_536 else np.uint32, mode="r")
    except (ValueError, OSError) as exc:
        raise ValueError(f"cannot memory-map {name} {str(p)!r}: {exc}") from exc
    if tokens.ndim != 1 or tokens.dtype.kind not in "ui":
        raise ValueError(
            f"{name} {str(p)!r} must be a 1-D integer array, got shape {tokens.shape} and dtype {tokens.dtype}"
        )
    if len(tokens) < 2:
        raise ValueError(f"{name} {str(p)!r} holds {len(tokens)} token(s); at least 2 are needed")
    low, high = _id_range(tokens)
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"{name} {str(p)!r} contains token id {bad}, outside the model's vocabulary "
            f"[0, {vocab_size}): was it encoded with a different tokenizer?"
        )
    return tokens


def _id_range(tokens: TokenArray) -> tuple[int, int]:
    low, high = 0, 0
    for i in range(0, len(tokens), _SCAN_CHUNK):
        chunk = tokens[i : i + _SCAN_CHUNK]
        low, high = min(low, int(chunk.min())), max(high, int(chunk.max()))
    return low, high


@torch.inference_mode()
def evaluate(
    model: torch.nn.Module,
    tokens: TokenArray,
    context_length: int,
    batch_size: int,
    max_batches: int,
    device: torch.device,
    dtype: torch.dtype = torch.float32,
) -> float:
    """Mean cross-entropy over fixed, non-overlapping windows of ``tokens``.

    Up to ``max_batches · batch_size`` windows of ``context_length`` tokens,
    spread evenly over the array (all of them when it is short), so every
    evaluation of a run sees the same tokens and consumes no randomness.
    """
    n_windows = (len(tokens) - 1) // context_length
    if n_windows < 1:
        raise ValueError(
            f"validation data has {len(tokens)} tokens; context_length {context_length} "
            f"needs at least {context_length + 1}"
        )
    take = min(n_windows, max_batches * batch_size)
    starts = (np.arange(take, dtype=np.int64) * n_windows // take) * context_length
    offsets = np.arange(context_length + 1, dtype=np.int64)
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, take, batch_size):
        index = starts[i : i + batch_size, None] + offsets[None, :]
        windows = torch.from_numpy(np.asarray(tokens[index], dtype=np.int64)).to(device)
        with _autocast(device, dtype):
            logits = model(windows[:, :-1])
        total += float(cross_entropy(logits, windows[:, 1:])) * windows.shape[0]
    model.train(was_training)
    return total / take


def train(config: TrainConfig, *, progress: bool = True, verbose: bool | None = None) -> TrainResult:
    """Train a ``TransformerLM`` as ``config`` says (SPEC §3 training loop).

    Writes ``OUT_DIR/config.json``, ``OUT_DIR/log.jsonl`` (one JSON record per
    log step: ``step``, ``train_loss``, ``val_loss``, ``lr``, ``grad_norm``,
    ``tokens_seen``, ``elapsed_s``), checkpoints at ``config.checkpoint_path``
    every ``checkpoint_interval`` steps and at the end, and ``OUT_DIR/loss.png``.
    ``progress`` shows a tqdm bar; ``verbose`` (default: ``progress``) prints
    one line per evaluation and checkpoint.

    Raises:
        FileNotFoundError: a data file or the resume checkpoint is missing.
        ValueError: unusable data, a device that is not available, or a resume
            checkpoint of a different model shape.
        FloatingPointError: the loss became NaN/inf (the last good state is saved).
    """
    say: Callable[[str], None] = tqdm.write if (progress if verbose is None else verbose) else _mute
    device = resolve_device(config.device)
    mcfg = config.model
    train_tokens = open_tokens(config.train_data, mcfg.vocab_size, name="train_data")
    if len(train_tokens) < mcfg.context_length + 1:
        raise ValueError(
            f"train_data has {len(train_tokens)} tokens; context_length {mcfg.context_length} "
            f"needs at least {mcfg.context_length + 1}"
        )
    val_tokens = open_tokens(config.val_data, mcfg.vocab_size, name="val_data") if config.val_data else None
    if val_tokens is not None and len(val_tokens) < mcfg.context_length + 1:
        raise ValueError(
            f"val_data has {len(val_tokens)} tokens; context_length {mcfg.context_length} "
            f"needs at least {mcfg.context_length + 1}"
        )
    with _deterministic_algorithms(config.deterministic, device), _cpu_threads(config.threads):
        return _train(config, device, train_tokens, val_tokens, progress, say)


def _train(
    config: TrainConfig,
    device: torch.device,
    train_tokens: TokenArray,
    val_tokens: TokenArray | None,
    progress: bool,
    say: Callable[[str], None],
) -> TrainResult:
    run = _Run(config, device, train_tokens, val_tokens, say)
    run.log_untrained()
    bar = tqdm(
        total=config.steps, initial=run.start, desc="train", unit="step", disable=not progress, dynamic_ncols=True
    )
    run.model.train()
    interrupt = _GracefulInterrupt(say)
    try:
        with interrupt:
            while run.step < config.steps and not interrupt.requested:
                run.train_step()
                bar.update(1)
                run.after_step(bar)
        if interrupt.requested and run.step < config.steps:
            run.stop_interrupted()
    except BaseException as exc:
        bar.close()
        run.stop_on_error(exc)
        _plot_quietly(config, run.log.path, run.out_dir)
        raise
    bar.close()
    return run.result(_plot_quietly(config, run.log.path, run.out_dir))


class _Run:
    """One training run: its model, optimizer, data generator, log and
    counters, and the steps ``_train`` takes with them."""

    def __init__(
        self,
        config: TrainConfig,
        device: torch.device,
        train_tokens: TokenArray,
        val_tokens: TokenArray | None,
        say: Callable[[str], None],
    ) -> None:
        self.config, self.device, self.say = config, device, say
        self.train_tokens, self.val_tokens = train_tokens, val_tokens
        self.dtype = getattr(torch, config.dtype)
        self.out_dir = Path(config.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.ckpt_path = config.checkpoint_path
        self.ckpt_path.parent.mkdir(parents=True, exist_ok=True)
        resume_path = _resume_path(config)
        _announce_start(config, resume_path, say)
        torch.manual_seed(config.seed)
        self.model = TransformerLM(config.model, device=device)
        self.optimizer = AdamW(
            self.model.parameters(), lr=config.lr, betas=config.betas, eps=config.eps, weight_decay=config.weight_decay
        )
        self.batch_rng = np.random.default_rng(config.seed)
        self.start, self.elapsed_before, self.tokens_seen = 0, 0.0, 0
        if resume_path is not None:
            self.start, self.elapsed_before, self.tokens_seen = _resume(
                resume_path, config, self.model, self.optimizer, self.batch_rng
            )
            say(f"resumed from {resume_path} at step {self.start}")
        (self.out_dir / CONFIG_NAME).write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        self.log = _JsonlLog(self.out_dir / LOG_NAME, keep_through=self.start if resume_path else None)
        self.clip_at = config.max_grad_norm if config.max_grad_norm is not None else math.inf
        self.tokens_per_step = config.batch_size * config.model.context_length
        self.t0 = time.perf_counter()
        self.step = self.saved_step = self.start  # saved_step: the newest step whose state is on disk (or start)
        self.last_train: float | None = None
        self.last_val: float | None = None
        self.window: list[float] = []
        self.grad_norm = math.nan
        self.lr = math.nan
        self.phase = "idle"  # "batch": forward/backward running; "update": the optimizer is writing
        self.rng_before: dict[str, Any] = self.batch_rng.bit_generator.state

    def schedule(self, t: int) -> float:
        c = self.config
        return cosine_lr(t, c.lr, c.min_lr, c.warmup_iters, c.cosine_iters)

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.t0

    def evaluate(self) -> float | None:
        if self.val_tokens is None:
            return None
        c = self.config
        return evaluate(
            self.model, self.val_tokens, c.model.context_length, c.batch_size, c.eval_batches, self.device, self.dtype
        )

    def save(self, step: int) -> None:
        metadata = {
            "config": self.config.to_dict(),
            "data_rng": self.batch_rng.bit_generator.state,
            "elapsed_s": self.elapsed(),
            "tokens_seen": self.tokens_seen,
        }
        save_checkpoint(self.model, self.optimizer, step, self.ckpt_path, save_rng_state=True, metadata=metadata)
        if self.config.keep_checkpoints:
            _atomic_copy(self.ckpt_path, self.ckpt_path.with_suffix(f".step{step}{self.ckpt_path.suffix}"))
        self.saved_step = step

    def log_untrained(self) -> None:
        """A fresh run logs the untrained model's validation loss (≈ ln(vocab_size)) at step 0."""
        if self.start == 0 and self.val_tokens is not None:
            self.last_val = self.evaluate()
            self.log.write(_record(0, None, self.last_val, self.schedule(0), None, 0, self.elapsed()))

    def train_step(self) -> None:
        """Update ``t = step + 1``: draw its batch, forward, backward, clip, step."""
        t = self.step + 1
        self.lr = lr = self.schedule(t)
        self.rng_before = self.batch_rng.bit_generator.state
        self.phase = "batch"
        x, y = get_batch(
            self.train_tokens,
            self.config.batch_size,
            self.config.model.context_length,
            self.device,
            generator=self.batch_rng,
        )
        with _autocast(self.device, self.dtype):
            loss = cross_entropy(self.model(x), y)
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            raise FloatingPointError(
                f"training loss is {loss_value} at step {t} (lr {lr:.3g}): try a lower lr or max_grad_norm"
            )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.grad_norm = clip_grad_norm(self.model.parameters(), self.clip_at)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.phase = "update"
        self.optimizer.step()
        self.step, self.phase = t, "idle"
        self.tokens_seen += self.tokens_per_step
        self.window.append(loss_value)

    def after_step(self, bar: Any) -> None:
        """Log, evaluate and checkpoint at their intervals (and at the last step)."""
        c, step = self.config, self.step
        final = step == c.steps
        do_eval = self.val_tokens is not None and (_every(step, c.eval_interval) or final)
        if do_eval or final or _every(step, c.log_interval):
            self.last_train = sum(self.window) / len(self.window)
            self.window.clear()
            if do_eval:
                self.last_val = self.evaluate()
            val = self.last_val if do_eval else None
            self.log.write(
                _record(step, self.last_train, val, self.lr, self.grad_norm, self.tokens_seen, self.elapsed())
            )
            bar.set_postfix(loss=f"{self.last_train:.3f}", lr=f"{self.lr:.2e}", refresh=False)
            if do_eval:
                self.say(_summary(step, c.steps, self.last_train, self.last_val, self.lr, self.elapsed()))
        if final or _every(step, c.checkpoint_interval):
            self.save(step)

    def stop_interrupted(self) -> None:
        """Ctrl-C: log the partial window, save the last step, say how to resume."""
        step = self.step
        if self.window:
            self.last_train = sum(self.window) / len(self.window)
            self.log.write(
                _record(
                    step, self.last_train, None, self.schedule(step), self.grad_norm, self.tokens_seen, self.elapsed()
                )
            )
        if step > self.saved_step:
            self.save(step)
        self.say(
            f"interrupted: checkpoint of step {step} saved to {self.ckpt_path}; resume with --resume {self.ckpt_path}"
        )

    def stop_on_error(self, exc: BaseException) -> None:
        """Save the last completed step unless the optimizer was writing (then the state is torn)."""
        step = self.step
        if self.phase == "batch":  # the batch was drawn but not applied: undo the draw
            self.batch_rng.bit_generator.state = self.rng_before
        if self.phase != "update" and step > self.saved_step:
            try:
                self.save(step)
                self.say(f"{type(exc).__name__}: checkpoint of step {step} saved to {self.ckpt_path} before stopping")
            except Exception as save_exc:  # report, but let the original error propagate
                self.say(f"could not save a checkpoint after {type(exc).__name__}: {save_exc}")
        elif self.phase == "update":
            self.say(
                f"{type(exc).__name__} inside the optimizer update: the state is inconsistent and "
                f"was not saved; the last checkpoint is step {self.saved_step} at {self.ckpt_path}"
            )

    def result(self, plot_path: Path | None) -> TrainResult:
        return TrainResult(
            step=self.step,
            start_step=self.start,
            train_loss=self.last_train,
            val_loss=self.last_val,
            tokens_seen=self.tokens_seen,
            elapsed_s=self.elapsed(),
            checkpoint=self.ckpt_path,
            log_path=self.log.path,
            plot_path=plot_path,
            interrupted=self.step < self.config.steps,
        )


def _announce_start(config: TrainConfig, resume_path: Path | None, say: Callable[[str], None]) -> None:
    """Say that ``resume="auto"`` found nothing; warn before a fresh run overwrites a checkpoint."""
    ckpt_path = config.checkpoint_path
    if config.resume == "auto" and resume_path is None:
        say(f"resume auto: no checkpoint at {ckpt_path} yet, starting from step 0")
    elif resume_path is None and ckpt_path.exists():
        warnings.warn(
            f"starting a fresh run: the existing checkpoint {str(ckpt_path)!r} will be "
            "overwritten (pass resume='auto' / --resume auto to continue it)",
            stacklevel=2,
        )


# --- helpers ---------------------------------------------------------------------


def _mute(_: str) -> None:
    pass


def _every(step: int, interval: int) -> bool:
    return interval > 0 and step % interval == 0


@contextlib.contextmanager
def _deterministic_algorithms(enabled: bool, device: torch.device) -> Iterator[None]:
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
def _cpu_threads(threads: int | None) -> Iterator[None]:
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


@contextlib.contextmanager
def _autocast(device: torch.device, dtype: torch.dtype) -> Iterator[None]:
    if dtype == torch.float32:
        yield
    else:
        with torch.autocast(device_type=device.type, dtype=dtype):
            yield


def _record(
    step: int,
    train_loss: float | None,
    val_loss: float | None,
    lr: float,
    grad_norm: float | None,
    tokens_seen: int,
    elapsed_s: float,
) -> dict[str, Any]:
    return {
        "step": step,
        "train_loss": train_loss,
        "val_loss": val_loss,
        "lr": lr,
        "grad_norm": grad_norm,
        "tokens_seen": tokens_seen,
        "elapsed_s": round(elapsed_s, 3),
    }


def _summary(step: int, steps: int, train: float, val: float | None, lr: float, secs: float) -> str:
    val_text = f"  val {val:.4f}" if val is not None else ""
    return f"step {step:>6}/{steps}  train {train:.4f}{val_text}  lr {lr:.2e}  {secs:7.1f}s"


def _resume_path(config: TrainConfig) -> Path | None:
    if config.resume is None:
        return None
    if config.resume == "auto":
        return config.checkpoint_path if config.checkpoint_path.exists() else None
    path = Path(config.resume)
    if not path.is_file():
        raise FileNotFoundError(f"resume checkpoint {str(path)!r} does not exist")
    return path


def _resume(
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


class _JsonlLog:
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


class _GracefulInterrupt:
    """First SIGINT: set ``requested`` (the loop finishes its step and saves);
    second: raise KeyboardInterrupt at once. Only the main thread can install
    signal handlers; elsewhere this does nothing (Ctrl-C raises as usual)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.requested = False
        self._say = say
        self._previous: Any = None

    def __enter__(self) -> "_GracefulInterrupt":
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


def _atomic_copy(src: Path, dst: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _plot_quietly(config: TrainConfig, log_path: Path, out_dir: Path) -> Path | None:
    if not config.plot:
        return None
    from lmspec.reference.plotting import plot_loss_curve

    try:
        return plot_loss_curve(log_path, out_dir / PLOT_NAME, title=f"{config.out_dir}")
    except Exception as exc:  # a plot must never cost the run its result
        warnings.warn(f"could not write the loss plot: {exc}", stacklevel=2)
        return None
