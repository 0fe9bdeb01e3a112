"""Typed configuration of a training run (SPEC §3 training loop).

``TrainConfig`` holds everything ``reference.training.loop.train`` needs: the
model shape (a nested ``ModelConfig``), AdamW and schedule hyperparameters,
batch/step counts, logging/eval/checkpoint intervals, paths, seed, device and
dtype. It is frozen and validated in ``__post_init__``; errors name the field
and its value.

A config file is JSON (``.json``) or TOML (``.toml``) with the same keys, the
model's under ``model``::

    {"train_data": "data/train.npy", "val_data": "data/val.npy",
     "model": {"vocab_size": 2000, "context_length": 128, "d_model": 128,
               "num_layers": 2, "num_heads": 4, "d_ff": 384},
     "lr": 3e-3, "steps": 2000}

Unknown keys are rejected with the list of valid ones. ``TrainConfig.load``
merges a file with overrides (the CLI's flags), overrides winning.
"""

import dataclasses
import json
import math
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmspec.reference.model_config import ModelConfig

__all__ = [
    "DTYPES",
    "MODEL_HELP",
    "ConfigError",
    "TrainConfig",
    "default_model",
    "read_config_file",
]

DTYPES: tuple[str, ...] = ("float32", "bfloat16")

# CS336 assignment 1's TinyStories model (the handout's suggested shape).
_DEFAULT_MODEL: dict[str, Any] = {
    "vocab_size": 10_000,
    "context_length": 256,
    "d_model": 512,
    "num_layers": 4,
    "num_heads": 16,
    "d_ff": 1344,
    "rope_theta": 10_000.0,
}

MODEL_HELP: dict[str, str] = {
    "vocab_size": "vocabulary size (must exceed every token id in the data)",
    "context_length": "maximum sequence length (tokens per training window)",
    "d_model": "residual stream width",
    "num_layers": "number of Transformer blocks",
    "num_heads": "attention heads (d_model must be divisible by it)",
    "d_ff": "feed-forward inner width (SwiGLU: about 8/3 d_model, a multiple of 64)",
    "rope_theta": "RoPE base theta",
    "eps": "RMSNorm epsilon",
    "norm": "normalisation ablation: pre | post | none",
    "use_rope": "rotary position embeddings (off: NoPE)",
    "ffn": "feed-forward ablation: swiglu | silu",
}


class ConfigError(ValueError):
    """An invalid configuration: unknown key, wrong type, or out-of-range value."""


def default_model() -> ModelConfig:
    """The CS336 TinyStories shape: vocab 10,000, context 256, 4 × d_model 512, 16 heads."""
    return ModelConfig(**_DEFAULT_MODEL)


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class TrainConfig:
    """One training run (SPEC §3). Field help texts double as the CLI's ``--help``.

    The learning rate for update ``t`` (1-based) is
    ``cosine_lr(t, lr, min_lr, warmup_iters, cosine_cycle_iters or steps)``.
    Intervals of 0 mean "only at the end of the run".
    """

    train_data: str = field(metadata=_help("training tokens: a 1-D .npy (or raw uint16 .bin)"))
    val_data: str | None = field(
        default=None, metadata=_help("validation tokens (.npy/.bin); none: no validation loss")
    )
    out_dir: str = field(default="runs/lm", metadata=_help("directory for log.jsonl, loss.png and config.json"))
    model: ModelConfig = field(default_factory=default_model, metadata=_help("model shape"))
    batch_size: int = field(default=32, metadata=_help("sequences per step"))
    steps: int = field(default=5000, metadata=_help("total optimizer steps of the run"))
    lr: float = field(default=1e-3, metadata=_help("peak learning rate (alpha_max)"))
    min_lr: float = field(default=1e-4, metadata=_help("final learning rate (alpha_min)"))
    warmup_iters: int = field(default=200, metadata=_help("linear warmup steps (T_w)"))
    cosine_cycle_iters: int | None = field(
        default=None, metadata=_help("step where the cosine reaches min_lr (T_c); none: = steps")
    )
    betas: tuple[float, float] = field(default=(0.9, 0.95), metadata=_help("AdamW (beta1, beta2)"))
    eps: float = field(default=1e-8, metadata=_help("AdamW epsilon"))
    weight_decay: float = field(default=0.1, metadata=_help("AdamW decoupled weight decay"))
    max_grad_norm: float | None = field(default=1.0, metadata=_help("global gradient-norm clip; none: no clipping"))
    eval_interval: int = field(default=200, metadata=_help("steps between validation losses"))
    eval_batches: int = field(default=20, metadata=_help("validation batches per evaluation (fixed windows)"))
    log_interval: int = field(default=20, metadata=_help("steps between log.jsonl records"))
    checkpoint_interval: int = field(default=1000, metadata=_help("steps between checkpoints"))
    checkpoint: str | None = field(default=None, metadata=_help("checkpoint path; none: OUT_DIR/checkpoint.pt"))
    keep_checkpoints: bool = field(
        default=False, metadata=_help("also keep a copy of every checkpoint as NAME.stepN.pt")
    )
    resume: str | None = field(
        default=None,
        metadata=_help("checkpoint to resume from; 'auto': the checkpoint path if it exists"),
    )
    seed: int = field(default=0, metadata=_help("seed of the model init and batch sampling"))
    deterministic: bool = field(
        default=True,
        metadata=_help("deterministic torch kernels during the run (needed for a bit-exact resume)"),
    )
    threads: int | None = field(
        default=None,
        metadata=_help("torch CPU threads during the run; none: torch's default (one per core)"),
    )
    device: str = field(default="cpu", metadata=_help("torch device: cpu, cuda, cuda:1, mps"))
    dtype: str = field(default="float32", metadata=_help("compute dtype: float32 | bfloat16 (autocast)"))
    plot: bool = field(default=True, metadata=_help("write OUT_DIR/loss.png (needs matplotlib)"))

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name != "model":
                _check_type(f.name, getattr(self, f.name), _field_types()[f.name])
        if not isinstance(self.model, ModelConfig):
            raise ConfigError(f"model must be a ModelConfig, got {type(self.model).__name__}")
        for name in ("batch_size", "steps", "eval_batches"):
            value = getattr(self, name)
            _require(name, value, value >= 1, "must be >= 1")
        for name in ("warmup_iters", "eval_interval", "log_interval", "checkpoint_interval"):
            value = getattr(self, name)
            _require(name, value, value >= 0, "must be >= 0 (0: only at the end)")
        for name in ("lr", "min_lr", "eps", "weight_decay"):
            value = getattr(self, name)
            _require(name, value, math.isfinite(value) and value >= 0, "must be finite and >= 0")
        if self.threads is not None:
            _require("threads", self.threads, self.threads >= 1, "must be >= 1 (none: default)")
        if self.cosine_cycle_iters is not None:
            value = self.cosine_cycle_iters
            _require("cosine_cycle_iters", value, value >= 0, "must be >= 0 (none: = steps)")
        if self.min_lr > self.lr:
            raise ConfigError(f"min_lr ({self.min_lr}) must be <= lr ({self.lr})")
        if self.warmup_iters > self.cosine_iters:
            which = "cosine_cycle_iters" if self.cosine_cycle_iters is not None else "steps"
            raise ConfigError(f"warmup_iters ({self.warmup_iters}) must be <= {which} ({self.cosine_iters})")
        for i, beta in enumerate(self.betas):
            _require(f"betas[{i}]", beta, 0.0 <= beta < 1.0, "must be in [0, 1)")
        if self.max_grad_norm is not None:
            value = self.max_grad_norm
            _require("max_grad_norm", value, value > 0, "must be > 0 (none: no clipping)")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype ({self.dtype!r}) must be one of {', '.join(DTYPES)}")
        for name in ("train_data", "out_dir", "device"):
            value = getattr(self, name)
            _require(name, value, value != "", "must not be empty")

    # --- derived values ------------------------------------------------------
    @property
    def cosine_iters(self) -> int:
        """``T_c``: ``cosine_cycle_iters``, or ``steps`` when it is unset."""
        return self.steps if self.cosine_cycle_iters is None else self.cosine_cycle_iters

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.checkpoint) if self.checkpoint else Path(self.out_dir) / "checkpoint.pt"

    # --- (de)serialisation -----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples as lists), the inverse of ``from_dict``."""
        out = dataclasses.asdict(self)
        out["betas"] = list(self.betas)
        return out

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with ``changes`` applied and validated like ``from_dict`` input."""
        return TrainConfig.from_dict(_merge(self.to_dict(), changes))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainConfig":
        """Build from a (JSON/TOML-shaped) mapping; ints are accepted for floats,
        lists for tuples.

        Raises:
            ConfigError: unknown key (the message lists the valid ones), missing
                ``train_data``, a value of the wrong type, or one out of range.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"a config must be a mapping of keys to values, got {data!r}")
        types_ = _field_types()
        unknown = sorted(set(data) - set(types_))
        if unknown:
            model_keys = [k for k in unknown if k in _model_types()]
            hint = f" (model keys such as {model_keys[0]!r} go under 'model')" if model_keys else ""
            raise ConfigError(
                f"unknown config key(s) {', '.join(map(repr, unknown))}{hint}; valid keys: {', '.join(types_)}"
            )
        if "train_data" not in data or data["train_data"] is None:
            raise ConfigError("train_data is required (path of the training tokens .npy)")
        kwargs = {k: _coerce(k, v, types_[k]) for k, v in data.items() if k != "model"}
        if "model" in data:
            kwargs["model"] = _model_from_dict(data["model"])
        try:
            return cls(**kwargs)
        except ConfigError:
            raise
        except (TypeError, ValueError) as exc:  # ModelConfig/hook errors: keep the first line
            raise ConfigError(str(exc).splitlines()[0]) from exc

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None) -> "TrainConfig":
        """Read a config file (optional) and apply ``overrides`` on top.

        Overrides use the file's keys; model keys go under ``"model"`` (only the
        given ones replace the file's).
        """
        data = read_config_file(path) if path is not None else {}
        return cls.from_dict(_merge(data, dict(overrides or {})))


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Parse a JSON or TOML config file (chosen by suffix; JSON otherwise).

    Raises:
        ConfigError: missing file, a parse error (with line/column), or a
            top level that is not a table/object.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    text = p.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot parse config file {str(p)!r}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold an object/table at the top level")
    return data


# --- helpers -------------------------------------------------------------------


def _require(name: str, value: Any, ok: bool, rule: str) -> None:
    if not ok:
        raise ConfigError(f"{name} ({value!r}) {rule}")


def _merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overrides.items():
        if key == "model" and isinstance(value, Mapping) and isinstance(merged.get("model"), Mapping):
            merged["model"] = {**merged["model"], **value}
        else:
            merged[key] = value
    return merged


def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def _model_types() -> dict[str, Any]:
    return typing.get_type_hints(ModelConfig)


def _model_from_dict(data: Any) -> ModelConfig:
    if isinstance(data, ModelConfig):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"model must be a table of model hyperparameters, got {data!r}")
    types_ = _model_types()
    unknown = sorted(set(data) - set(types_))
    if unknown:
        raise ConfigError(
            f"unknown model key(s) {', '.join(map(repr, unknown))}; valid model keys: {', '.join(types_)}"
        )
    merged = {**_DEFAULT_MODEL, **data}
    kwargs = {k: _coerce(f"model.{k}", v, types_[k]) for k, v in merged.items()}
    try:
        return ModelConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"model: {str(exc).splitlines()[0]}") from exc


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "none"
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return " or ".join(_type_name(a) for a in args)
    if typing.get_origin(tp) is tuple:
        return f"a list of {len(args)} numbers"
    return getattr(tp, "__name__", str(tp))


def _matches(value: Any, tp: Any) -> bool:
    if tp is type(None):
        return value is None
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return any(_matches(value, a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        return isinstance(value, tuple) and len(value) == len(args) and all(_matches(v, a) for v, a in zip(value, args))
    if tp in (int, float):  # bool is an int subclass, but never a valid number here
        return isinstance(value, tp) and not isinstance(value, bool)
    return isinstance(value, tp)


def _coerce(name: str, value: Any, tp: Any) -> Any:
    """Normalise a parsed value to ``tp`` (int → float, list → tuple) or raise."""
    options = typing.get_args(tp) if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union else (tp,)
    if float in options and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, list) and any(typing.get_origin(o) is tuple for o in options):
        value = tuple(float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value)
    _check_type(name, value, tp)
    return value


def _check_type(name: str, value: Any, tp: Any) -> None:
    if not _matches(value, tp):
        raise ConfigError(f"{name} must be {_type_name(tp)}, got {value!r} ({type(value).__name__})")
