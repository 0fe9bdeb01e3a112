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

import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from lmspec.reference.nn import TransformerLM
from lmspec.reference.training.checkpoint import save_checkpoint
from lmspec.reference.training.clipping import clip_grad_norm
from lmspec.reference.training.config import TrainConfig
from lmspec.reference.training.data import get_batch, resolve_device
from lmspec.reference.training.evaluation import TokenArray, autocast, evaluate, open_tokens
from lmspec.reference.training.loss import cross_entropy
from lmspec.reference.training.optimizer import AdamW
from lmspec.reference.training.runtime import (
    GracefulInterrupt,
    JsonlLog,
    atomic_copy,
    checkpoint_to_resume,
    cpu_threads,
    deterministic_algorithms,
    plot_quietly,
    resume_from,
)
from lmspec.reference.training.schedule import cosine_lr

__all__ = ["TrainResult", "evaluate", "open_tokens", "train"]

LOG_NAME = "log.jsonl"
CONFIG_NAME = "config.json"


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
    with deterministic_algorithms(config.deterministic, device), cpu_threads(config.threads):
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
    interrupt = GracefulInterrupt(say)
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
        plot_quietly(config, run.log.path, run.out_dir)
        raise
    bar.close()
    return run.result(plot_quietly(config, run.log.path, run.out_dir))


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
        resume_path = checkpoint_to_resume(config)
        _announce_start(config, resume_path, say)
        torch.manual_seed(config.seed)
        self.model = TransformerLM(config.model, device=device)
        self.optimizer = AdamW(
            self.model.parameters(), lr=config.lr, betas=config.betas, eps=config.eps, weight_decay=config.weight_decay
        )
        self.batch_rng = np.random.default_rng(config.seed)
        self.start, self.elapsed_before, self.tokens_seen = 0, 0.0, 0
        if resume_path is not None:
            self.start, self.elapsed_before, self.tokens_seen = resume_from(
                resume_path, config, self.model, self.optimizer, self.batch_rng
            )
            say(f"resumed from {resume_path} at step {self.start}")
        (self.out_dir / CONFIG_NAME).write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        self.log = JsonlLog(self.out_dir / LOG_NAME, keep_through=self.start if resume_path else None)
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
            atomic_copy(self.ckpt_path, self.ckpt_path.with_suffix(f".step{step}{self.ckpt_path.suffix}"))
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
        with autocast(self.device, self.dtype):
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
