"""Load the implementation under test and expose its adapter functions.

An adapter is a Python module given as a file path (``path/to/adapters.py``)
or an importable name (``reference.adapter``). For a file, the root of the
repository that holds it goes on ``sys.path`` (so ``from cs336_basics import
...`` works) and the file is imported under its dotted path from that root (so
relative imports such as ``from .common import x`` work), exactly as pytest
would import a student's ``tests/adapters.py``.
"""

import functools
import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_ADAPTER = "reference.adapter"

CORE_FUNCTIONS: tuple[str, ...] = (
    "run_linear",
    "run_embedding",
    "run_swiglu",
    "run_scaled_dot_product_attention",
    "run_multihead_self_attention",
    "run_multihead_self_attention_with_rope",
    "run_rope",
    "run_transformer_block",
    "run_transformer_lm",
    "run_rmsnorm",
    "run_silu",
    "run_get_batch",
    "run_softmax",
    "run_cross_entropy",
    "run_gradient_clipping",
    "get_adamw_cls",
    "run_get_lr_cosine_schedule",
    "run_save_checkpoint",
    "run_load_checkpoint",
    "get_tokenizer",
    "run_train_bpe",
)

EXTENDED_FUNCTIONS: tuple[str, ...] = (
    "run_silu_ffn",
    "run_transformer_block_ablation",
    "run_transformer_lm_ablation",
    "run_count_parameters",
    "run_forward_flops",
    "run_perplexity",
    "run_temperature_softmax",
    "run_top_p_filter",
    "run_sample_next_token",
    "run_generate",
)

_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


class AdapterLoadError(RuntimeError):
    """The adapter module could not be found or imported."""


class NotImplementedByAdapter(Exception):
    """Raised by a wrapped adapter function that is absent or not implemented."""

    def __init__(self, name: str, extended: bool):
        self.name = name
        self.extended = extended
        kind = "not provided" if extended else "not implemented"
        super().__init__(f"{kind}: {name}")


@dataclass
class Adapter:
    spec: str  # what the user passed
    module: types.ModuleType
    origin: str  # file the module came from
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)

    @property
    def missing_core(self) -> list[str]:
        return [n for n in CORE_FUNCTIONS if n not in self.functions]

    @property
    def missing_extended(self) -> list[str]:
        return [n for n in EXTENDED_FUNCTIONS if n not in self.functions]

    def get(self, name: str) -> Callable[..., Any]:
        """A wrapper for ``name`` that turns absence or NotImplementedError
        into NotImplementedByAdapter (reported as "not implemented")."""
        extended = name in EXTENDED_FUNCTIONS
        fn = self.functions.get(name)
        if fn is None:
            raise NotImplementedByAdapter(name, extended)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except NotImplementedError as exc:
                raise NotImplementedByAdapter(name, extended) from exc

        return call


def _find_root(path: Path) -> Path:
    for parent in path.parents:
        if any((parent / marker).exists() for marker in _ROOT_MARKERS):
            return parent
    return path.parent


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec or "/" in spec or Path(spec).exists()


def _import_file(path: Path) -> types.ModuleType:
    if not path.is_file():
        raise AdapterLoadError(f"adapter file not found: {path}")
    root = _find_root(path)
    for extra in (root / "src", root):
        if extra.is_dir() and str(extra) not in sys.path:
            sys.path.insert(0, str(extra))
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts
    dotted = ".".join(parts)
    top = sys.modules.get(parts[0]) if len(parts) > 1 else None
    top_file = getattr(top, "__file__", None) or next(iter(getattr(top, "__path__", [])), None)
    clash = top is not None and top_file is not None and root not in Path(top_file).resolve().parents
    if all(p.isidentifier() for p in parts) and not clash:
        try:
            return importlib.import_module(dotted)
        except ImportError as exc:
            # Only fall through when the *adapter itself* could not be located
            # under that name; a broken import inside it is the submission's error.
            if exc.name not in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}:
                raise
    # Fallback: load the file as a submodule of a synthetic package rooted at
    # its folder, so sibling relative imports still resolve.
    pkg_name = "_lmspec_submission"
    pkg = types.ModuleType(pkg_name)
    pkg.__path__ = [str(path.parent)]
    sys.modules[pkg_name] = pkg
    name = f"{pkg_name}.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_adapter(spec: str | None = None) -> Adapter:
    """Import the adapter named by ``spec`` (or ``LMSPEC_ADAPTER``, or the
    reference) and collect its core and extended functions."""
    spec = spec or os.environ.get("LMSPEC_ADAPTER") or DEFAULT_ADAPTER
    try:
        if _looks_like_path(spec):
            module = _import_file(Path(spec).expanduser().resolve())
        else:
            module = importlib.import_module(spec)
    except AdapterLoadError:
        raise
    except ModuleNotFoundError as exc:
        raise AdapterLoadError(f"cannot import adapter {spec!r}: {exc}") from exc
    functions = {}
    for name in CORE_FUNCTIONS + EXTENDED_FUNCTIONS:
        fn = getattr(module, name, None)
        if callable(fn):
            functions[name] = fn
    origin = getattr(module, "__file__", None) or spec
    return Adapter(spec=spec, module=module, origin=str(origin), functions=functions)
