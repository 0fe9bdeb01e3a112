"""Import the implementation under test the way pytest would import a
student's ``tests/adapters.py``, without pytest and without anything else of
the submission: its ``conftest.py`` and its tests are never loaded.

- The submission root (given by the judge) and its ``src/`` go first on
  ``sys.path``, so ``import cs336_basics`` finds the student's package and a
  package of theirs called ``tests``, ``tools`` or ``reference`` is theirs
  (nothing of lmspec is importable here).
- The adapter file is imported under its dotted path from the root
  (``tests.adapters``), so relative imports (``from .common import x``) work;
  if that name resolves elsewhere, the file is loaded as a submodule of a
  synthetic package rooted at its folder.
- A package that reads its own installed metadata
  (``importlib.metadata.version("cs336_basics")``, as the CS336 skeleton
  does) finds it: when the root's pyproject.toml names a distribution that is
  not installed, a minimal ``.dist-info`` (name and version only) is written
  to the worker's scratch folder, which goes on ``sys.path``. Nothing is
  installed anywhere.
- A profile whose curriculum names its own classes (gpt2, encdec) has a *binder*
  (binders/NAME.py): ``prepare(data)`` runs before the import (e.g. makes an
  offline tokenizer available), ``bind(module)`` after it, and what the judge
  calls are the adapter functions it returns.
- Intake (intake.py): a notebook or a folder of chapters is run as one
  module of its definitions, statement by statement (a statement that fails
  is left out with a note); a ``.py`` file that cannot be imported as is
  (demo code failing at the top level) is run the same way. A module the
  submission imports that is not installed is bound to a placeholder that
  fails only when used (placeholders.py). ``info["intake"]`` records what was
  taken, left out, and bound to placeholders.
"""

import ast
import importlib
import importlib.metadata
import importlib.util
import linecache
import re
import sys
import tomllib
import traceback
import types
from pathlib import Path
from typing import Any

from . import intake as intake_
from .placeholders import MissingModules

SYNTHETIC_PACKAGE = "_lmspec_submission"
#: Top-level names of lmspec's own packages: a submission importing one of
#: them (when it has no package of that name itself) is reaching for the
#: reference or the suite. Attempts are recorded even when they fail.
LMSPEC_NAMES = ("reference", "conformance", "lmspec")


class ImportWatch:
    """A meta-path finder that only watches: it records imports of lmspec's
    package names and lets the normal finders do the work (or fail)."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.partition(".")[0] in LMSPEC_NAMES and fullname not in self.attempts:
            self.attempts.append(fullname)
        return None


WATCH = ImportWatch()


class AdapterLoadError(Exception):
    """The adapter module could not be found (not an error of its code)."""


#: Largest pyproject.toml read for the metadata.
_MAX_PYPROJECT = 1 << 20
#: A distribution name (PEP 508) and a version (the characters PEP 440 allows):
#: nothing that could name a path reaches the dist-info folder's name.
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$")
_VERSION = re.compile(r"^v?[0-9][0-9A-Za-z!+._-]{0,98}$")


def project_metadata(root: Path) -> tuple[str, str] | None:
    """(name, version) from ``root/pyproject.toml`` ([project], or poetry's
    table); None when there is none, or it is not a plain file of the root,
    too large, or not parseable, or its name is not a distribution name."""
    path = root / "pyproject.toml"
    try:
        real = path.resolve()
        if not real.is_relative_to(root.resolve()) or not real.is_file() or real.stat().st_size > _MAX_PYPROJECT:
            return None
        data = tomllib.loads(real.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    tool = data.get("tool")
    for table in (data.get("project"), tool.get("poetry") if isinstance(tool, dict) else None):
        if isinstance(table, dict) and isinstance(table.get("name"), str):
            name, version = table["name"], table.get("version")
            if not _NAME.match(name):
                return None
            if not isinstance(version, str) or not _VERSION.match(version) or ".." in version:
                version = "0+unknown"
            return name, version
    return None


def provide_metadata(root: Path, scratch: Path) -> str | None:
    """Make the root's distribution visible to importlib.metadata when it is
    not installed; returns what was done (for the report) or None."""
    meta = project_metadata(root)
    if meta is None:
        return None
    name, version = meta
    try:
        importlib.metadata.version(name)
        return None  # installed (e.g. in a per-submission environment)
    except importlib.metadata.PackageNotFoundError:
        pass
    folder = scratch / "dist-info"
    normalized = re.sub(r"[-_.]+", "_", name)
    info = folder / f"{normalized}-{version}.dist-info"
    if info.parent != folder:
        return None
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    sys.path.append(str(folder))
    importlib.invalidate_caches()
    return f"{name} {version} (from pyproject.toml, not installed)"


def _import_file(path: Path, root: Path) -> types.ModuleType:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts
    dotted = ".".join(parts)
    if all(p.isidentifier() for p in parts):
        try:
            module = importlib.import_module(dotted)
            origin = Path(getattr(module, "__file__", "") or "").resolve()
            if origin == path:
                return module
        except ImportError as exc:
            # fall through only when the adapter itself was not found under
            # that name; a failing import inside it is the submission's error
            if exc.name not in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}:
                raise
        for name in [n for n in sys.modules if n == dotted or dotted.startswith(n + ".")]:
            del sys.modules[name]  # a same-named module from elsewhere
    pkg = types.ModuleType(SYNTHETIC_PACKAGE)
    pkg.__path__ = [str(path.parent)]
    sys.modules[SYNTHETIC_PACKAGE] = pkg
    name = f"{SYNTHETIC_PACKAGE}.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AdapterLoadError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load(
    adapter: str,
    root: Path | None,
    scratch: Path,
    extra_paths: tuple[str, ...] = (),
    binder: str | None = None,
    data: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Import ``adapter`` (a file path or a module name). Returns
    ``{"module": module or None, "origin", "metadata", "error"}``; ``error``
    describes an import failure with the submission's file and line. With a
    binder, ``module`` is the namespace of adapter functions it made."""
    sys.meta_path.insert(0, WATCH)
    for extra in reversed(extra_paths):
        sys.path.insert(0, extra)
    if root is not None:
        for folder in (root / "src", root):
            if folder.is_dir():
                sys.path.insert(0, str(folder))
    info: dict[str, Any] = {"module": None, "origin": adapter, "metadata": None, "error": None, "intake": None}
    missing = MissingModules(root, LMSPEC_NAMES) if root is not None else None
    if missing is not None:
        sys.meta_path.append(missing)
    bind = None
    if binder is not None:
        bind = importlib.import_module(f"{__package__}.binders.{binder}")
        bind.prepare({name: Path(path) for name, path in (data or {}).items()})
    try:
        if root is not None:
            info["metadata"] = provide_metadata(root, scratch)
        if adapter.endswith(".ipynb") or (root is not None and Path(adapter).is_dir()):
            module, info["intake"] = run_intake(Path(adapter), root or Path(adapter).parent)
        elif adapter.endswith(".py"):
            path = Path(adapter)
            if not path.is_file():
                raise AdapterLoadError(f"adapter file not found: {adapter}")
            try:
                module = _import_file(path, root or path.parent)
            except Exception as exc:
                reaching = isinstance(exc, ImportError) and (exc.name or "").partition(".")[0] in LMSPEC_NAMES
                if isinstance(exc, SyntaxError | AdapterLoadError) or reaching:
                    raise  # not demo code: a syntax error, or reaching for lmspec's own packages
                module, info["intake"] = run_intake(path, root or path.parent, as_is=describe_import_error(exc, root))
        else:
            module = importlib.import_module(adapter)
        info["origin"] = str(getattr(module, "__file__", None) or adapter)
        info["module"] = types.SimpleNamespace(**bind.bind(module)) if bind is not None else module
        info["absent"] = _absent(bind, module)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt at import too
        info["error"] = describe_import_error(exc, root)
    if missing is not None and missing.bound:
        info["intake"] = (info["intake"] or {}) | {"placeholders": dict(missing.bound)}
    return info


def _absent(bind: Any, module: Any) -> dict[str, str]:
    """The binder's reasons, in its curriculum's words, for the adapter
    functions it could not make (none when it gives none, or fails to)."""
    explain = getattr(bind, "absent", None)
    if explain is None:
        return {}
    try:
        return {str(k): str(v) for k, v in explain(module).items()}
    except Exception:  # a reason is a courtesy: never a load failure
        return {}


def run_intake(path: Path, root: Path, as_is: dict[str, Any] | None = None) -> tuple[types.ModuleType, dict]:
    """Run the definitions of a notebook, a chapter folder or a ``.py`` file
    that did not import as is (``as_is``: why), statement by statement, into
    one module; (the module, the intake's record)."""
    taken = intake_.read(path, root, definitions_only=True)
    stem = re.sub(r"\W", "_", path.stem if path.is_file() else path.name) or "submission"
    name = f"{SYNTHETIC_PACKAGE}.{stem}"
    if SYNTHETIC_PACKAGE not in sys.modules:
        pkg = types.ModuleType(SYNTHETIC_PACKAGE)
        pkg.__path__ = [str(path.parent)]
        sys.modules[SYNTHETIC_PACKAGE] = pkg
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    for folder in dict.fromkeys(str((root / f).parent) for f in taken.files):
        if folder not in sys.path:
            sys.path.insert(1, folder)  # a chapter's own imports (from previous_chapters import ...)
    for compiled, text in taken.sources.items():
        filename = str(root / compiled)
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    for piece in taken.kept():
        filename = str(root / piece.filename)
        try:
            tree = ast.parse(piece.code)
            ast.increment_lineno(tree, piece.line - 1)
            exec(compile(tree, filename, "exec"), module.__dict__)
        except Exception as exc:
            piece.kept = False
            piece.why = f"failed when run: {type(exc).__name__}: {str(exc)[:300]}"
    record = taken.record()
    if as_is is not None:
        record["as_is_error"] = {k: as_is.get(k) for k in ("type", "message", "file", "line")}
    return module, record


def describe_import_error(exc: BaseException, root: Path | None) -> dict[str, Any]:
    """Type, message, and the innermost frame inside the submission."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = None
    for frame in reversed(frames):
        if root is None or Path(frame.filename).resolve().is_relative_to(root):
            where = frame
            break
    if isinstance(exc, SyntaxError) and exc.filename:
        file, line = exc.filename, exc.lineno or 0
    elif where is not None:
        file, line = where.filename, where.lineno or 0
    else:
        file, line = None, 0
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "file": file,
        "line": line,
        "traceback": "".join(traceback.format_exception(exc))[-6000:],
    }
