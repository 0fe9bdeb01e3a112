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

import os
import sys
from importlib.machinery import ModuleSpec
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


class _LazyHook:
    """Installs jaxtyping's hook when the first checked module is imported,
    and hands it that module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not any(fullname == m or fullname.startswith(m + ".") for m in CHECKED):
            return None
        sys.meta_path.remove(self)
        from jaxtyping import install_import_hook

        # left installed on purpose: users import submodules later
        finder = install_import_hook(list(CHECKED), "beartype.beartype").hook
        return finder.find_spec(fullname, path, target)


if TYPECHECKED:
    sys.meta_path.insert(0, _LazyHook())

__version__ = "0.2.0"
