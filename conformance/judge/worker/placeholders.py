"""Placeholders for modules that are not installed where the worker runs.

A submission's ``import matplotlib.pyplot as plt`` (or ``import wandb``, or
``import tensorflow as tf``) must not end its grading when the package is not
there: like array-api-tests' stubs for missing names, the name is bound to a
placeholder that fails only when it is used, with an error naming the module.
The items that really use it fail with that message; the others are graded.

``MissingModules`` is a meta-path finder placed last, so it is asked only
after every real finder has failed. It answers only for a top-level module
(or a submodule of a placeholder), only for an import written in the
submission's own files (not lmspec's, not an installed package's), and not
for an import a ``try ... except ImportError`` guards (the submission has its
own fallback, which must run as written). lmspec's own package names are
never given a placeholder.
"""

import ast
import difflib
import importlib.abc
import importlib.machinery
import linecache
import sys
import types
from pathlib import Path
from typing import Any

#: Exceptions whose handler means the import has a fallback of the submission's own.
_CATCHES_IMPORT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


#: missing top-level module -> the submission's own module whose name is close to it (a misspelled import)
_NEAR: dict[str, str] = {}


def not_installed(module: str, used: str) -> ModuleNotFoundError:
    near = _NEAR.get(module)
    typo = f", nor a module of the submission (No module named '{module}'; did you mean {near}?)" if near else ""
    exc = ModuleNotFoundError(
        f"{module} is not installed where lmspec ran{typo or f' (No module named {module!r})'}: {used} was bound "
        f"to a placeholder, and using it fails"
    )
    exc.name = module
    return exc


class Placeholder:
    """Stands for ``name`` (e.g. ``matplotlib.pyplot.figure``); every use raises."""

    __slots__ = ("_lmspec_module", "_lmspec_name")

    def __init__(self, name: str, module: str) -> None:
        object.__setattr__(self, "_lmspec_name", name)
        object.__setattr__(self, "_lmspec_module", module)

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise not_installed(self._lmspec_module, self._lmspec_name)

    def __getattr__(self, attr: str) -> "Placeholder":
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self._lmspec_name}.{attr}", self._lmspec_module)

    def __repr__(self) -> str:
        return f"<placeholder for {self._lmspec_name}: {self._lmspec_module} is not installed>"

    def __mro_entries__(self, bases: tuple) -> tuple:
        raise not_installed(self._lmspec_module, self._lmspec_name)

    __call__ = __iter__ = __len__ = __bool__ = __getitem__ = __setitem__ = __enter__ = __exit__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __matmul__ = _fail
    __setattr__ = __delattr__ = _fail


class PlaceholderModule(types.ModuleType):
    """A module that is not installed: every attribute is a Placeholder."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self.__name__}.{attr}", self.__name__.partition(".")[0])


class MissingModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The last finder: a placeholder for a module nobody else found (see the module docstring)."""

    def __init__(self, root: Path, refused: tuple[str, ...] = ()) -> None:
        self.root = Path(root).resolve()
        self.refused = set(refused)
        #: top-level module -> where it was first imported ("file:line")
        self.bound: dict[str, str] = {}
        self._guards: dict[str, list[tuple[int, int]]] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        top = fullname.partition(".")[0]
        if top in self.refused or ("." in fullname and top not in self.bound):
            return None
        where = self._importer()
        if where is None:
            return None
        filename, line = where
        if self._guarded(filename, line):
            return None
        if top not in self.bound:
            try:
                shown = Path(filename).resolve().relative_to(self.root).as_posix()
            except ValueError:
                shown = filename
            self.bound[top] = f"{shown}:{line}"
            near = _close_module(top, {self.root, Path(filename).resolve().parent})
            if near:
                _NEAR[top] = near
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = PlaceholderModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None

    def _importer(self) -> tuple[str, int] | None:
        """The submission file and line of the import statement being run
        (None when the import is not written in the submission)."""
        frame = sys._getframe(1)
        skipped = (__file__, str(Path(importlib.__file__).parent))
        while frame is not None:
            filename = frame.f_code.co_filename
            if not filename.startswith("<frozen") and not filename.startswith(skipped):
                break
            frame = frame.f_back
        if frame is None:
            return None
        filename = frame.f_code.co_filename
        if "site-packages" in filename or "dist-packages" in filename:
            return None
        try:
            inside = Path(filename).resolve().is_relative_to(self.root)
        except (OSError, ValueError):
            return None
        return (filename, frame.f_lineno) if inside else None

    def _guarded(self, filename: str, line: int) -> bool:
        """Whether ``line`` lies in the body of a ``try`` that catches ImportError."""
        if filename not in self._guards:
            spans: list[tuple[int, int]] = []
            try:
                tree = ast.parse("".join(linecache.getlines(filename)))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.Try) and any(_catches_import(h) for h in node.handlers) and node.body:
                    spans.append((node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno))
            self._guards[filename] = spans
        return any(start <= line <= end for start, end in self._guards[filename])


def _close_module(name: str, folders: set[Path]) -> str | None:
    """A module of the submission (``x.py`` or a package ``x/``, in ``folders``) whose name is close to ``name``."""
    local = set()
    for folder in folders:
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        local |= {e.stem for e in entries if e.suffix == ".py"} | {
            e.name for e in entries if (e / "__init__.py").is_file()
        }
    close = difflib.get_close_matches(name, sorted(local - {name}), n=1, cutoff=0.8)
    return close[0] if close else None


def _catches_import(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(handler.type)
        if isinstance(n, ast.Name | ast.Attribute)
    }
    return bool(names & _CATCHES_IMPORT)
