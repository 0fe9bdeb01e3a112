"""Intake: what a person hands over (a ``.py`` file, a notebook, a folder of
chapters) as a list of top-level statements to run, in order, with a record
of what was taken from where and what was left out.

This module reads submission code as text only (``json`` and ``ast``; it
imports nothing of the submission and runs nothing): the grader uses it to
see which names a notebook or a chapter folder defines, and the sandboxed
worker (loader.py) runs the statements it keeps, one by one, into one module.

- A notebook is its code cells, in order. IPython magics and shell lines
  (``%...``, ``!...``, a bare ``pip install ...``) are dropped (a ``pass`` of
  the same indentation takes their place, so line numbers hold); a cell that
  still does not parse is skipped with a note.
- A chapter folder is its notebooks and ``.py`` files taken together in
  chapter order (files without a number first, e.g. ``previous_chapters.py``,
  then by the first number in the name): a later definition of a name
  overrides an earlier one, as a reader's kernel would.
- Definitions only: imports, functions, classes, and assignments of literals
  or of expressions over names already kept (``GPT_CONFIG_124M = {...}``) are
  kept, in source order; top-level calls, loops, expressions, and assignments
  that call something (building a model, reading a file) are left out, each
  with its reason. A ``try`` or ``if`` whose every branch holds only such
  definitions is kept whole (``try: import tiktoken except ImportError: ...``).
"""

import ast
import builtins
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Largest notebook or source file read (a reader's chapter is well under 1 MB;
#: a notebook with its outputs can be a few MB).
MAX_FILE = 16 << 20
#: Files of a chapter folder that are not chapters.
NOT_CHAPTERS = re.compile(r"^(setup|conftest|noxfile|test_.*|.*_test)\.py$")
_MAGIC = re.compile(r"^(\s*)(%|!|(?:pip|conda|apt|apt-get)\s+install\b)")
#: Cell magics whose cell is Python (only the magic line is dropped).
_PYTHON_CELL_MAGIC = re.compile(r"^%%(time|timeit|capture|prun|debug)\b")
_NUMBER = re.compile(r"\d+")
_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__"}


@dataclass
class Piece:
    """One top-level statement: where it is and whether it is kept."""

    file: str  # path relative to the submission's folder
    cell: int | None  # notebook cell (1-based, counting code cells), None for a .py file
    line: int  # first line (in the cell, or in the file)
    code: str  # the statement's source
    kept: bool
    why: str = ""  # why it was left out

    @property
    def where(self) -> str:
        cell = f" code cell {self.cell}" if self.cell is not None else ""
        return f"{self.file}{cell} line {self.line}"

    @property
    def filename(self) -> str:
        """The name its code is compiled under (tracebacks, linecache)."""
        return f"{self.file}#cell{self.cell}" if self.cell is not None else self.file


@dataclass
class Intake:
    """What was read: the files (in order), the statements, the notes."""

    files: list[str] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    magics: dict[str, list[int]] = field(default_factory=dict)  # notebook -> code cells with magic lines dropped
    sources: dict[str, str] = field(default_factory=dict)  # compiled name -> its text

    def kept(self) -> list[Piece]:
        return [p for p in self.pieces if p.kept]

    def left_out(self) -> list[Piece]:
        return [p for p in self.pieces if not p.kept]

    def defined_names(self) -> set[str]:
        """Names the kept statements bind (for the profile's detection)."""
        names: set[str] = set()
        for piece in self.kept():
            try:
                tree = ast.parse(piece.code)
            except SyntaxError:
                continue
            for node in tree.body:
                names |= _binds(node)
        return names

    def record(self) -> dict[str, Any]:
        """The record the report shows (JSON-able): files, the cells or lines
        left out and why, notes."""
        return {
            "files": list(self.files),
            "kept": len(self.kept()),
            "left_out": [
                {
                    "file": p.file,
                    "cell": p.cell,
                    "line": p.line,
                    "where": p.where,
                    "why": p.why,
                    "code": _first_line(p.code),
                }
                for p in self.left_out()
            ],
            "notes": list(self.notes),
            "magics": {f: list(c) for f, c in self.magics.items()},
            "cells": self.cells(),
        }

    def cells(self) -> dict[str, list[int]]:
        """Notebook -> the code cells a kept statement came from (the cells graded)."""
        graded: dict[str, list[int]] = {}
        for piece in self.kept():
            if piece.cell is not None and piece.cell not in graded.setdefault(piece.file, []):
                graded[piece.file].append(piece.cell)
        return graded


def _first_line(code: str) -> str:
    line = code.strip().splitlines()[0] if code.strip() else ""
    return line if len(line) <= 80 else line[:77] + "..."


def _binds(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name.split(".")[0]) for a in node.names if a.name != "*"}
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    names: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            names |= _binds(child)
        elif isinstance(child, ast.excepthandler):
            for stmt in child.body:
                names |= _binds(stmt)
    return names


# --- reading ---------------------------------------------------------------------------------------------------
def read_text(path: Path) -> str:
    if path.stat().st_size > MAX_FILE:
        raise ValueError(f"{path.name} is larger than {MAX_FILE >> 20} MB")
    return path.read_text(encoding="utf-8", errors="replace")


def notebook_cells(text: str) -> list[str]:
    """The code cells of a notebook's JSON, in order (ValueError when it is not a notebook)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not a notebook (its JSON does not parse: {exc})") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise ValueError("not a notebook (no list of cells)")
    code = []
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            if isinstance(source, list):
                source = "".join(s for s in source if isinstance(s, str))
            code.append(source if isinstance(source, str) else "")
    return code


def drop_magics(source: str) -> tuple[str, int]:
    """(the cell with its magic and shell lines replaced by ``pass``, how many).
    A cell magic drops the whole cell (``%%bash``) or its first line only
    when the rest is Python (``%%time``)."""
    lines, dropped = [], 0
    body = source.lstrip("\n").splitlines()
    if body and body[0].startswith("%%"):
        if _PYTHON_CELL_MAGIC.match(body[0]) is None:
            return "", len(body)  # %%bash, %%writefile, %%html: not Python
        lines, dropped, body = ["pass"], 1, body[1:]  # %%time, %%capture: the rest is Python
        source = "\n".join(body)
    for line in source.splitlines():
        match = _MAGIC.match(line)
        if match:
            lines.append(f"{match.group(1)}pass")
            dropped += 1
        else:
            lines.append(line)
    return "\n".join(lines) + "\n", dropped


# --- keeping definitions ---------------------------------------------------------------------------------------
def _names_used(node: ast.AST) -> tuple[set[str], bool]:
    """(names an expression reads that it does not bind itself, whether it calls something)."""
    local: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Lambda):
            args = sub.args
            local |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        elif isinstance(sub, ast.comprehension):
            local |= {n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name)}
        elif isinstance(sub, ast.NamedExpr):
            local.add(sub.target.id)
    calls = any(isinstance(sub, ast.Call | ast.Await | ast.Yield | ast.YieldFrom) for sub in ast.walk(node))
    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - local, calls


def left_out_because(node: ast.stmt, known: set[str]) -> str:
    """Why a top-level statement is not a definition ("" when it is one).
    ``known``: the names kept so far (updated with what a kept statement binds)."""
    why = _why(node, known)
    if not why:
        known |= _binds(node)
    return why


def _why(node: ast.stmt, known: set[str]) -> str:
    if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return ""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        if node.value is None:
            return ""
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(not isinstance(n, ast.Name | ast.Tuple | ast.List | ast.Starred) for t in targets for n in [t]):
            return "an assignment into an object"
        read, calls = _names_used(node.value)
        if isinstance(node, ast.AugAssign):
            read |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        if calls:
            return "an assignment that calls something"
        unknown = sorted(read - known - _BUILTINS)
        if unknown:
            return f"an assignment over names not defined above it ({', '.join(unknown)})"
        return ""
    if isinstance(node, ast.If) and _is_main_test(node.test):
        return "the main block"
    if isinstance(node, ast.Try | ast.If):
        if isinstance(node, ast.If):
            read, calls = _names_used(node.test)
            if calls or read - known - _BUILTINS:
                return "an if whose test runs something"
            branches = [node.body, node.orelse]
        else:
            branches = [node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]]
        trial = set(known)
        for branch in branches:
            for stmt in branch:
                reason = _why(stmt, trial)
                if reason and not isinstance(stmt, ast.Pass):
                    return f"a {'try' if isinstance(node, ast.Try) else 'if'} block holding more than definitions"
                trial |= _binds(stmt)
        return ""
    if isinstance(node, ast.Expr):
        if isinstance(node.value, ast.Constant):
            return "a bare value"
        return "a call" if _names_used(node.value)[1] else "a bare expression"
    if isinstance(node, ast.For | ast.AsyncFor | ast.While):
        return "a loop"
    if isinstance(node, ast.With | ast.AsyncWith):
        return "a with block"
    if isinstance(node, ast.Pass):
        return "a dropped magic or shell line"
    return f"a {type(node).__name__.lower()} statement"


def _is_main_test(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(test))
        and any(isinstance(n, ast.Constant) and n.value == "__main__" for n in ast.walk(test))
    )


# --- the three layouts -----------------------------------------------------------------------------------------
def _add_source(
    intake: Intake, source: str, file: str, cell: int | None, known: set[str], definitions_only: bool
) -> None:
    where = f"{file} code cell {cell}" if cell is not None else file
    try:
        tree = ast.parse(source, filename=where)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        intake.notes.append(f"{where}: skipped, it does not parse{line}: {type(exc).__name__}: {exc}")
        return
    name = f"{file}#cell{cell}" if cell is not None else file
    intake.sources[name] = source
    lines = source.splitlines()
    for node in tree.body:
        end = node.end_lineno or node.lineno
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        code = "\n".join(lines[start - 1 : end])
        why = left_out_because(node, known) if definitions_only else ""
        if isinstance(node, ast.Pass) and why:
            continue  # a dropped magic line: recorded in magics
        intake.pieces.append(Piece(file, cell, start, code, not why, why))


def take_file(intake: Intake, path: Path, root: Path, known: set[str], definitions_only: bool) -> None:
    """Add one ``.py`` file or notebook to ``intake``."""
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    try:
        text = read_text(path)
    except (OSError, ValueError) as exc:
        intake.notes.append(f"{rel}: skipped, it cannot be read ({exc})")
        return
    intake.files.append(rel)
    if path.suffix != ".ipynb":
        _add_source(intake, text, rel, None, known, definitions_only)
        return
    try:
        cells = notebook_cells(text)
    except ValueError as exc:
        intake.notes.append(f"{rel}: skipped, {exc}")
        return
    for number, source in enumerate(cells, start=1):
        cleaned, dropped = drop_magics(source)
        if dropped:
            intake.magics.setdefault(rel, []).append(number)
        if cleaned.strip():
            _add_source(intake, cleaned, rel, number, known, definitions_only)


def chapter_key(path: Path) -> tuple[int, list[int], str]:
    """Files without a number first, then by the numbers in the name (``ch02`` < ``ch10``)."""
    numbers = [int(n) for n in _NUMBER.findall(path.stem)]
    return (1 if numbers else 0, numbers, path.name)


def chapter_files(folder: Path) -> list[Path]:
    """The notebooks and ``.py`` files of a chapter folder (its top level only),
    in chapter order."""
    found = [
        p
        for p in folder.iterdir()
        if p.is_file()
        and not p.is_symlink()
        and not p.name.startswith(".")
        and (p.suffix == ".ipynb" or (p.suffix == ".py" and not NOT_CHAPTERS.match(p.name)))
    ]
    return sorted(found, key=chapter_key)


def chapter_folders(folder: Path) -> list[Path]:
    """Subfolders of a folder of chapters: those with a number in their name
    holding a notebook, in chapter order (``ch02``, ``ch03``, ...)."""
    found = [
        p
        for p in folder.iterdir()
        if p.is_dir()
        and not p.is_symlink()
        and not p.name.startswith(".")
        and _NUMBER.search(p.name)
        and any(c.suffix == ".ipynb" for c in chapter_files(p))
    ]
    return sorted(found, key=chapter_key)


def files_of(path: Path) -> list[Path]:
    """What a path stands for: a file; a chapter folder's files; or a folder
    of chapters' files, chapter by chapter."""
    if path.is_file():
        return [path]
    own = chapter_files(path)
    if any(p.suffix == ".ipynb" for p in own):
        return own
    return [f for sub in chapter_folders(path) for f in chapter_files(sub)]


def read(path: Path, root: Path, definitions_only: bool | None = None) -> Intake:
    """The intake of a ``.py`` file, a notebook or a folder (see the module
    docstring). ``definitions_only`` defaults to True for notebooks and folders,
    False for a single ``.py`` file (imported as is)."""
    if definitions_only is None:
        definitions_only = not (path.is_file() and path.suffix == ".py")
    intake, known = Intake(), set()
    for file in files_of(path):
        take_file(intake, file, root, known, definitions_only)
    return intake


def to_json(intake: Intake) -> dict[str, Any]:
    return asdict(intake)
