"""lmspec reference implementation of shared/SPEC.md.

The modules that compute on tensors (nn, training, generation, accounting,
the adapters) are checked at runtime by jaxtyping + beartype through
jaxtyping's import hook. The hook is lazy: jaxtyping and beartype are
imported, and the hook installed, the first time such a module is imported,
so a command that never touches a tensor (``--help``, train-bpe, encode)
pays nothing for it. The tokenizer works on plain ints, bytes and strings:
instrumenting it doubled ``train-bpe``'s whole run (0.18 -> 0.35 s on
corpus.en), so it is checked in lmspec's own tests only (tests/conftest.py
installs the hook for it). Configuration and the command line validate
their own values. ``JAXTYPING_DISABLE=1`` turns the checks off (no hook).
"""

import functools
import os
import sys
from importlib import _bootstrap_external  # type: ignore[attr-defined]
from importlib.machinery import ModuleSpec, SourceFileLoader
from typing import Any

#: The modules the hook instruments (their submodules too).
CHECKED: tuple[str, ...] = tuple(
    f"{__name__}.{name}"
    for name in (
        "nn",
        "gpt2",
        "generation",
        "accounting",
        "adapter",
        "encdec",
        "plotting",
        "training.loss",
        "training.optimizer",
        "training.schedule",
        "training.clipping",
        "training.data",
        "training.checkpoint",
        "training.loop",
        "training.evaluation",
        "training.runtime",
    )
)


def _checks_disabled() -> bool:
    """JAXTYPING_DISABLE as jaxtyping reads it (0/false: checks on; 1/true: off)."""
    value = os.environ.get("JAXTYPING_DISABLE", "0").lower()
    if value not in ("0", "false", "1", "true"):
        raise ValueError("JAXTYPING_DISABLE must be 0, 1, false or true")
    return value in ("1", "true")


TYPECHECKED: bool = not _checks_disabled()


class CheckedImports:
    """The type-check hook for ``modules`` (and their submodules): jaxtyping's,
    installed the first time one of them is imported, so that nothing is paid
    before. It stays in front of the import system and hands each such module
    to jaxtyping's finder, whose loader it gives ``_OwnTagOnly``'s execution."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        self.modules = modules
        self._finder: Any = None

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not any(fullname == m or fullname.startswith(m + ".") for m in self.modules):
            return None
        if self._finder is None:
            from jaxtyping import install_import_hook

            self._finder = install_import_hook(list(self.modules), "beartype.beartype").hook
            sys.meta_path.remove(self._finder)  # asked through this finder only
        spec = self._finder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if isinstance(loader, SourceFileLoader) and not isinstance(loader, _OwnTagOnly):
            loader.__class__ = _own_tag_only(type(loader))
        return spec


#: importlib's own, taken before any hook replaces it.
_UNTAGGED = _bootstrap_external.cache_from_source


class _OwnTagOnly(SourceFileLoader):
    """Placed under jaxtyping's loader: jaxtyping keeps the bytecode of a module
    it instruments under a tag of its own, by replacing importlib's
    ``cache_from_source`` for the whole execution of that module; every module
    the instrumented one imported (torch, much of the standard library) was
    looked up under that tag too, so compiled from source again in every
    process (3.5 CPU-seconds for torch alone on lmspec's machines, where
    bytecode is not written) or, where it is, cached a second time beside its
    own. Here the module's code is read under the tag, and its body runs with
    importlib's own."""

    def exec_module(self, module: Any) -> None:
        code = self.get_code(module.__name__)
        tagged = _bootstrap_external.cache_from_source
        _bootstrap_external.cache_from_source = _UNTAGGED
        try:
            exec(code, module.__dict__)
        finally:
            _bootstrap_external.cache_from_source = tagged


@functools.cache
def _own_tag_only(loader: type) -> type:
    return type(loader.__name__, (loader, _OwnTagOnly), {})


if TYPECHECKED:
    sys.meta_path.insert(0, CheckedImports(CHECKED))

__version__ = "0.2.0"
