"""The runtime half of the from-scratch audit (SPEC §0), run inside the worker.

While active, a profile hook records calls into ``torch.nn.functional``,
``torch.nn`` modules other than the containers, ``torch.optim`` optimizers and
schedulers, ``clip_grad_norm_`` and whole-item shortcuts (``torch.softmax``,
``Tensor.softmax``, ``torch.rms_norm``, ``torch._C._nn.*``...) that are made
on behalf of the implementation: the nearest caller that is not torch is the
submission's code, not this worker's own. These findings come from the
untrusted process and are hints: the judge labels them so, and scans the
sources itself.
"""

import os
import sys
import threading
import types
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import torch.nn.modules
import torch.nn.utils.clip_grad
import torch.optim

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_NN_MODULES_DIR = os.path.dirname(torch.nn.modules.__file__) + os.sep
_OPTIM_DIR = os.path.dirname(torch.optim.__file__) + os.sep
_WORKER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_ALLOWED_FILES = {
    _NN_MODULES_DIR + "module.py",
    _NN_MODULES_DIR + "container.py",
    _NN_MODULES_DIR + "__init__.py",
    _OPTIM_DIR + "optimizer.py",
    _OPTIM_DIR + "__init__.py",
}
SHORTCUTS = ("softmax", "log_softmax", "_softmax", "_log_softmax", "rms_norm", "layer_norm", "embedding")
_FORBIDDEN_BUILTINS: dict[int, str] = {
    id(getattr(torch, n)): f"torch.{n}" for n in SHORTCUTS if callable(getattr(torch, n, None))
}
_FORBIDDEN_BUILTINS[id(torch.special.softmax)] = "torch.special.softmax"
_FORBIDDEN_BUILTINS[id(torch.special.log_softmax)] = "torch.special.log_softmax"
_FORBIDDEN_BUILTINS |= {
    id(v): f"torch.nn.functional.{k}"
    for k, v in vars(F).items()
    if isinstance(v, types.BuiltinFunctionType) and not k.startswith(("_", "has_torch_function"))
}
_TENSOR_METHODS = {"softmax", "log_softmax"}
_LIB_MARKERS = (
    os.sep + "site-packages" + os.sep,
    os.sep + "dist-packages" + os.sep,
    os.sep + "lib" + os.sep + "python",
)
_file_labels: dict[str, str | None] = {}


def _forbidden_file(filename: str) -> str | None:
    """Label prefix when code in ``filename`` is a forbidden torch definition."""
    if filename in _file_labels:
        return _file_labels[filename]
    label = None
    if filename not in _ALLOWED_FILES:
        if filename == F.__file__:
            label = "torch.nn.functional"
        elif filename.startswith(_NN_MODULES_DIR):
            label = "torch.nn"
        elif filename.startswith(_OPTIM_DIR):
            label = "torch.optim"
        elif filename == torch.nn.utils.clip_grad.__file__:
            label = "torch.nn.utils"
    _file_labels[filename] = label
    return label


def _forbidden_builtin(fn: Any) -> str | None:
    name = _FORBIDDEN_BUILTINS.get(id(fn))
    if name is not None:
        return name
    if getattr(fn, "__module__", None) == "torch._C._nn":
        return f"torch.nn.functional.{fn.__name__}"
    if getattr(fn, "__name__", None) in _TENSOR_METHODS and isinstance(getattr(fn, "__self__", None), torch.Tensor):
        return f"torch.Tensor.{fn.__name__}"
    return None


def _is_library(filename: str) -> bool:
    return any(m in filename for m in _LIB_MARKERS)


def _is_installed(filename: str) -> bool:
    """In site-packages / dist-packages: an installed package, not the standard library."""
    return any(m in filename for m in _LIB_MARKERS[:2])


def _library_path(filename: str) -> str:
    """An installed file's path from its package folder (``pkg/model.py``)."""
    for marker in _LIB_MARKERS[:2]:
        if marker in filename:
            return filename.rsplit(marker, 1)[1]
    return filename


def relative(filename: str, root: Path | None) -> str:
    if root is None:
        return filename
    try:
        return str(Path(filename).resolve().relative_to(root))
    except (ValueError, OSError):
        return filename


class Recorder:
    """Context manager: records forbidden torch calls made on behalf of the
    implementation while active (this thread and threads it starts)."""

    def __init__(self, root: Path | None):
        self.root = root
        self.findings: list[dict[str, str]] = []
        self._seen: set[tuple[str, str]] = set()
        self._old: Any = None

    def _where(self, frame: types.FrameType | None) -> tuple[bool, str]:
        """(found, location) of the first non-torch frame from ``frame``: the
        line that reached torch. When that line is an installed package's (a
        codebase the adapter calls into), the implementation's line that
        called it follows: ``pkg/model.py:42 (called from adapters.py:17)``;
        past a standard-library frame, the implementation's line.
        Not found when a forbidden torch frame is on the way (a nested call)
        or the caller is this worker's own code."""
        first = own = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(_TORCH_DIR):
                if _forbidden_file(filename):
                    return False, ""
            elif filename.startswith(_WORKER_DIR):
                if first is None:
                    return False, ""
                break  # a library the worker itself called (a binder): no implementation line above it
            elif first is None:
                first = frame
                if not _is_library(filename):
                    own = frame
                    break
            elif not _is_library(filename):
                own = frame
                break
            frame = frame.f_back
        if first is None:
            return False, ""
        if own is None or own is first:
            return True, self._location(first)
        if _is_installed(first.f_code.co_filename):  # the codebase's line, then the adapter's
            return True, f"{self._location(first)} (called from {self._location(own)})"
        return True, self._location(own)  # a standard-library frame on the way: the implementation's line

    def _location(self, frame: types.FrameType) -> str:
        filename = frame.f_code.co_filename
        shown = _library_path(filename) if _is_library(filename) else relative(filename, self.root)
        return f"{shown}:{frame.f_lineno}"

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            prefix = _forbidden_file(frame.f_code.co_filename)
            if prefix is None:
                return
            head = frame.f_code.co_qualname.split(".", 1)[0]
            if head == "<module>":  # an import: the judge's source scan reports those
                return
            found, where = self._where(frame.f_back)
            name = f"{prefix}.{head}"
        elif event == "c_call":
            if frame.f_code.co_filename.startswith(_TORCH_DIR):  # torch's own plumbing
                return
            name = _forbidden_builtin(arg)
            if name is None:
                return
            found, where = self._where(frame)
        else:
            return
        if found and (name, where) not in self._seen:
            self._seen.add((name, where))
            self.findings.append({"function": name, "kind": "runtime call", "where": where})

    def __enter__(self) -> "Recorder":
        self._old = sys.getprofile()
        sys.setprofile(self._profile)
        threading.setprofile(self._profile)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.setprofile(self._old if callable(self._old) else None)
        threading.setprofile(None)  # type: ignore[arg-type]
