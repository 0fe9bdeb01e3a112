"""Loss-curve plot of a training log (SPEC §3 training loop: "a loss-curve plot").

Reads the JSONL log written by ``reference.training.loop.train`` (one record
per line with ``step``, ``train_loss``, ``val_loss``, ``lr``...) and draws the
train and validation losses against the step, with the learning rate on a
second axis. matplotlib is an optional dependency (``lmspec[plot]``): without
it ``plot_loss_curve`` warns and returns None instead of failing the run.
"""

import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["plot_loss_curve", "read_log"]


def read_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a JSONL training log, in file order (blank lines skipped).

    Raises:
        ValueError: a line that is not a JSON object (named by line number).
    """
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{os.fspath(path)}:{lineno}: not valid JSON ({exc})") from exc
            if not isinstance(record, dict):
                raise ValueError(f"{os.fspath(path)}:{lineno}: expected a JSON object")
            records.append(record)
    return records


def _series(records: Iterable[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for r in records:
        value = r.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            steps.append(int(r["step"]))
            values.append(float(value))
    return steps, values


def plot_loss_curve(
    log: str | os.PathLike | list[dict[str, Any]],
    out_path: str | os.PathLike,
    *,
    title: str | None = None,
    reference_lines: Mapping[str, float] | None = None,
) -> Path | None:
    """Write a PNG of train/validation loss (and learning rate) against step.

    ``log`` is a JSONL path or its records. ``reference_lines`` draws labelled
    horizontal lines (e.g. ``{"unigram": 5.9, "ln V": 6.9}``). Uses the Agg
    canvas directly, so it never touches the user's global matplotlib backend.

    Returns:
        The path written, or None (with a warning) when matplotlib is missing.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        warnings.warn(
            "matplotlib is not installed: skipping the loss plot (pip install 'lmspec[plot]' to get it)",
            stacklevel=2,
        )
        return None
    records = log if isinstance(log, list) else read_log(log)
    train_steps, train_loss = _series(records, "train_loss")
    val_steps, val_loss = _series(records, "val_loss")
    lr_steps, lr = _series(records, "lr")

    fig = Figure(figsize=(7.0, 4.2), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(train_steps, train_loss, label="train loss", color="tab:blue", linewidth=1.2)
    if val_steps:
        ax.plot(val_steps, val_loss, "o-", label="validation loss", color="tab:orange", ms=3)
    for i, (name, value) in enumerate((reference_lines or {}).items()):
        ax.axhline(value, linestyle="--", linewidth=0.9, color=f"C{i + 2}", label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.grid(alpha=0.3)
    if lr_steps:
        ax_lr = ax.twinx()
        ax_lr.plot(lr_steps, lr, color="tab:gray", linewidth=0.8, alpha=0.6, label="learning rate")
        ax_lr.set_ylabel("learning rate", color="tab:gray")
        ax_lr.tick_params(axis="y", colors="tab:gray")
        ax_lr.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title or "training loss")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out
