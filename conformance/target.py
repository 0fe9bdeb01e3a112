"""What is graded, worked out once: ``Target``.

The grader resolves the string the user gave (a repository folder, an
adapters file, a module name, or nothing for lmspec's reference) into a
Target: the adapter to import, the submission's root folder, its name, its
profile, the interpreter and environment its worker runs in. The Target
travels to the judge process as one JSON file (``--lmspec-target``) and from
the judge to the worker as the worker's command line
(conformance/judge/sandbox.py); nobody parses the string again. Run
directly (``pytest conformance --adapter X``), the plugin resolves it with
the same function.

Resolving reads the submission's files as data only (a bounded ``ast``
parse to see which names it defines, for the profile); when that cannot
tell (``from mine import *``), the names are asked of a sandboxed worker.

A symbolic link inside the submission is never followed out of it: the
folder the user gave (or, given a file, the submission's root) is the
boundary, and an adapters file or root folder that resolves outside it is
not graded: the Target then carries ``problem`` (naming the link), which the
grader reports as the submission's error (results.json, exit status 1).
"""

import ast
import dataclasses
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmspec import ROOT
from lmspec.conformance import profiles
from lmspec.conformance.judge.worker import intake

#: Files that mark a repository's top folder.
_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
#: Largest adapter file read to find its names (a real one is a few KB).
_MAX_SOURCE = 4 << 20


class TargetError(ValueError):
    """What was given is not something the grader can grade (a usage error)."""


@dataclass(frozen=True)
class Target:
    """What is graded (see the module docstring)."""

    given: str  # as the user gave it (for messages)
    adapter: str  # an absolute path to a .py file, or an import name
    root: Path | None  # the submission's folder (None for an import name)
    name: str  # the implementation's name in reports
    profile: str  # the profile's name
    is_reference: bool = False
    python: str | None = None  # the worker's interpreter (None: the judge's own)
    environment: dict[str, Any] | None = field(default=None, compare=False)
    detected_by: str = "given"  # how the profile was chosen: given, names, worker, default
    problem: str | None = None  # why it cannot be graded (the submission's fault: a link out of its folder)
    hidden: tuple[str, ...] = ()  # folders inside root the worker must not see (the grader's --out there)

    @property
    def is_file(self) -> bool:
        return self.adapter.endswith(".py")

    @property
    def is_intake(self) -> bool:
        """A notebook or a folder of chapters (run by the worker's intake)."""
        return self.root is not None and (self.adapter.endswith(".ipynb") or os.path.isdir(self.adapter))

    def with_(self, **changes: Any) -> "Target":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["root"] = str(self.root) if self.root is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Target":
        values = {f.name: data.get(f.name) for f in dataclasses.fields(cls) if f.name in data}
        values["root"] = Path(values["root"]) if values.get("root") else None
        values["hidden"] = tuple(values.get("hidden") or ())
        return cls(**values)

    def save(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Target":
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def looks_like_path(given: str) -> bool:
    return given.endswith(".py") or os.sep in given or "/" in given or Path(given).exists()


def submission_root(adapter_file: Path) -> Path:
    """The folder the submission lives in: the nearest ancestor of the
    adapters file with a repository marker. lmspec's own adapters (mutants,
    variants, hostile files in its tests/) are single files: their folder.
    The path is taken as written (absolute, links not resolved): the
    submission's own links are checked against it (``link_out``)."""
    adapter_file = Path(os.path.abspath(adapter_file))
    for parent in adapter_file.parents:
        if any(os.path.lexists(parent / marker) for marker in _ROOT_MARKERS):
            return adapter_file.parent if Path(os.path.realpath(parent)) == ROOT else parent
    return adapter_file.parent


def link_out(path: Path, boundary: Path) -> str | None:
    """None when ``path`` (absolute, under ``boundary`` as written) resolves
    inside ``boundary``; else what leads out: the first symbolic link (or
    ``..``) on the way, and where it points."""
    real_boundary = Path(os.path.realpath(boundary))
    if Path(os.path.realpath(path)).is_relative_to(real_boundary):
        return None
    try:
        parts = Path(os.path.abspath(path)).relative_to(os.path.abspath(boundary)).parts
    except ValueError:
        return f"{path} is not inside {boundary}"
    current = Path(os.path.abspath(boundary))
    for i, part in enumerate(parts):
        current = current / part
        rel = "/".join(parts[: i + 1])
        if part == "..":
            return f"{rel} leads out of the submission's folder {boundary}"
        if current.is_symlink() and not Path(os.path.realpath(current)).is_relative_to(real_boundary):
            link, real = os.readlink(current), os.path.realpath(current)
            shown = link if link == real else f"{link} ({real})"
            return (
                f"{rel} is a symbolic link to {shown}, outside the submission's folder {boundary}: links out of a "
                "submission are never followed"
            )
    return f"{path} resolves to {os.path.realpath(path)}, outside the submission's folder {boundary}"


def adapter_files(profile: profiles.Profile | None = None) -> list[str]:
    """Where a repository keeps its adapter: the profile's places (every profile's, in order)."""
    chosen = [profile] if profile else profiles.all_profiles()
    return list(dict.fromkeys(f for p in chosen for f in p.adapter_files))


def find_adapter(folder: Path, profile: profiles.Profile | None = None) -> Path | None:
    """The adapter file of a repository folder: the first of ``adapter_files``,
    in the folder or one level down (archives often unpack into a single top folder)."""
    candidates = adapter_files(profile)
    bases = [folder, *sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))]
    for base in bases:
        for rel in candidates:
            if (base / rel).is_file():
                return base / rel
    return None


def defined_names(path: Path) -> tuple[set[str], bool]:
    """(names a Python file defines at top level, whether it star-imports);
    read as data: a bounded parse, nothing executed."""
    try:
        if path.stat().st_size > _MAX_SOURCE:
            return set(), True
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return set(), False
    names: set[str] = set()
    star = False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    star = True
                else:
                    names.add(alias.asname or alias.name.split(".")[0])
    return names, star


def resolve(given: str | None, profile: str | None = None, *, python: str | None = None) -> Target:
    """The Target for what the user gave (TargetError when it is not gradable)."""
    try:
        chosen = profiles.get(profile) if profile else None
    except ValueError as exc:
        raise TargetError(f"--profile: {exc}") from None
    if not given:
        reference = chosen or profiles.get(profiles.DEFAULT)
        return _reference(reference.reference, reference, "given" if chosen else "default", python)
    for candidate in profiles.all_profiles():
        if given == candidate.reference:
            return _reference(given, chosen or candidate, "given" if chosen else "names", python)
    if not looks_like_path(given):
        return _module(given, chosen, python)
    path = Path(given).expanduser()
    if not path.exists() and not path.is_symlink():
        raise TargetError(
            f"{given}: no such file or folder (expected a repository folder, an adapters file or a module)"
        )
    boundary = None
    if path.is_dir():
        boundary = Path(os.path.realpath(path))  # the folder the user named: its own links are the user's
        chapters = _chapters(boundary, chosen)
        if chapters is not None:
            return chapters.with_(given=given, python=python)
        found = find_adapter(boundary, chosen)
        if found is None:
            raise TargetError(
                f"{given}: a folder without an adapters file or notebooks (expected a repository folder holding one "
                f"of {', '.join(adapter_files(chosen))}, or a folder of chapter notebooks)"
            )
        path = found
    else:
        path = Path(os.path.abspath(path))  # as written: a link on the way is the submission's (link_out)
    if path.suffix not in (".py", ".ipynb") or not (path.is_file() or path.is_symlink()):
        raise TargetError(
            f"{given}: not a Python file or a notebook (expected a repository folder, an adapters file, a notebook "
            "or a module)"
        )
    root = submission_root(path)
    boundary = boundary if boundary is not None and not boundary.is_relative_to(root) else root
    problem = link_out(root, boundary) or link_out(path, boundary)
    if problem is not None:
        profile = chosen or profiles.get(profiles.DEFAULT)
        return Target(given, str(path), root, root.name, profile.name, False, python, None, "given", problem)
    path, root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if path.suffix == ".ipynb" and path.is_file():
        return _intake_target(given, path, chosen).with_(python=python)
    if not path.is_file():
        raise TargetError(f"{given}: not a Python file (expected a repository folder, an adapters file or a module)")
    how = "given"
    if chosen is None:
        chosen, how = _detect_file(path)
    return Target(given, str(path), root, root.name, chosen.name, False, python, None, how)


def _chapters(folder: Path, chosen: profiles.Profile | None) -> Target | None:
    """A folder graded through intake: notebooks at its top level (with its
    ``.py`` files), or subfolders of chapter notebooks, unless the folder
    holds an adapters file of its own (``adapters.py``, ``tests/adapters.py``).
    A module one level down (an app's ``gpt_model.py``) never wins over them."""
    top = [folder / rel for rel in adapter_files(chosen) if (folder / rel).is_file()]
    if any(p.name.endswith("adapters.py") for p in top):
        return None
    if not any(p.suffix == ".ipynb" for p in intake.chapter_files(folder)) and (
        top or not intake.chapter_folders(folder)
    ):
        return None
    return _intake_target(str(folder), folder, chosen)


def _intake_target(given: str, path: Path, chosen: profiles.Profile | None) -> Target:
    """A notebook or a chapter folder: its root is the folder it lies in (or
    the folder itself); the profile comes from the names its definitions bind."""
    root = path if path.is_dir() else submission_root(path)
    root = Path(os.path.realpath(root))
    how = "given"
    if chosen is None:
        names = intake.read(path, root, definitions_only=True).defined_names()
        found = profiles.detect(names)
        chosen, how = (found, "names") if found is not None else (profiles.get(profiles.DEFAULT), "default")
    return Target(given, str(path), root, root.name, chosen.name, False, None, None, how)


def _reference(adapter: str, profile: profiles.Profile, how: str, python: str | None) -> Target:
    return Target(adapter, adapter, None, adapter, profile.name, True, python, None, how)


def _module(given: str, chosen: profiles.Profile | None, python: str | None) -> Target:
    top = given.partition(".")[0]
    if not top.isidentifier() or importlib.util.find_spec(top) is None:
        raise TargetError(
            f"{given}: not a file, a folder or an importable module (expected a repository folder, an adapters "
            "file or a module name)"
        )
    profile = chosen or profiles.get(profiles.DEFAULT)
    return Target(given, given, None, given, profile.name, False, python, None, "given" if chosen else "default")


def _detect_file(path: Path) -> tuple[profiles.Profile, str]:
    names, star = defined_names(path)
    found = profiles.detect(names)
    if found is not None:
        return found, "names"
    return profiles.get(profiles.DEFAULT), "default" if not star else "star-import"
