"""What the graded repository says about itself: its distribution name and
version, the Python it requires, its declared dependencies, and the CS336
handout edition it was forked from (its CHANGELOG.md). Read from files only;
nothing of the submission is imported here.

Every byte read here is the submission's, so every read is bounded: a file
is read only when it is a regular file inside the repository (a link out of
it is not followed) and no larger than its limit; a parse that fails
(invalid TOML, nesting thousands deep, invalid UTF-8) leaves the field
unset and says why in ``problems``; a name or version that is not a valid
PEP 508 name or PEP 440 version is not used at all (it could name a path).
"""

import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

_CHANGELOG_VERSION = re.compile(r"^#+\s*\[?v?(\d+)\.(\d+)(?:\.(\d+))?\]?", re.M)
#: Largest submission files read, and most requirements taken.
MAX_PYPROJECT = 1 << 20
MAX_REQUIREMENTS = 1 << 20
MAX_CHANGELOG_READ = 256 << 10
MAX_DEPENDENCIES = 500


class UnreadableFile(ValueError):
    """A submission file the grader does not read (the message says why)."""


def read_bounded(path: Path, root: Path, limit: int, *, truncate: bool = False) -> str | None:
    """The text of the submission file ``path`` (None when there is none):
    a regular file whose path, links resolved, stays inside ``root``, of at
    most ``limit`` bytes (or its first ``limit`` bytes, with ``truncate``).
    UnreadableFile otherwise."""
    if not os.path.lexists(path):
        return None
    real = os.path.realpath(path)
    name = os.path.relpath(path, root)
    if not Path(real).is_relative_to(os.path.realpath(root)):
        raise UnreadableFile(f"{name} is a link out of the repository (to {real}): not followed")
    try:
        info = os.stat(real)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(f"{name} is not a regular file")
        if info.st_size > limit and not truncate:
            raise UnreadableFile(f"{name} has {info.st_size} bytes, over the {limit}-byte limit")
        with open(real, "rb") as f:
            data = f.read(limit)
    except OSError as exc:
        raise UnreadableFile(f"{name} cannot be read: {exc.strerror}") from None
    return data.decode("utf-8", errors="replace")


def parse_toml(text: str, name: str) -> dict:
    """``text`` parsed as TOML; UnreadableFile when it is not (nesting too deep included)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UnreadableFile(f"{name} is not valid TOML: {exc}") from None
    except (RecursionError, MemoryError) as exc:
        raise UnreadableFile(f"{name} is nested too deeply to parse ({type(exc).__name__})") from None


def valid_name(value: object) -> str | None:
    """``value`` when it is a valid distribution name (PEP 508), else None."""
    from packaging.utils import InvalidName, canonicalize_name

    if not isinstance(value, str) or len(value) > 200:
        return None
    try:
        canonicalize_name(value, validate=True)
    except InvalidName:
        return None
    return value


def valid_version(value: object) -> str | None:
    """``value`` when it is a valid PEP 440 version, else None."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(value, str) or len(value) > 100:
        return None
    try:
        Version(value)
    except InvalidVersion:
        return None
    return value


@dataclass
class Repository:
    root: Path
    name: str | None = None
    version: str | None = None
    requires_python: str | None = None
    dependencies: list[str] = field(default_factory=list)
    edition: dict[str, str] | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read, and why
    pyproject_error: str | None = None  # pyproject.toml exists but could not be read

    def to_json(self) -> dict[str, object]:
        return {
            "root": str(self.root),
            "name": self.name,
            "version": self.version,
            "requires_python": self.requires_python,
            "dependencies": self.dependencies,
            "handout": self.edition,
            "problems": self.problems,
        }


def _table(data: dict, *keys: str) -> dict:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def inspect(root: Path) -> Repository:
    repo = Repository(root)
    data: dict = {}
    try:
        text = read_bounded(root / "pyproject.toml", root, MAX_PYPROJECT)
        data = parse_toml(text, "pyproject.toml") if text is not None else {}
    except UnreadableFile as exc:
        repo.pyproject_error = str(exc)
        repo.problems.append(f"{exc}: its name, version, requires-python and dependencies are not known")
    project, poetry = _table(data, "project"), _table(data, "tool", "poetry")
    for key in ("name", "version"):
        given = project.get(key) if key in project else poetry.get(key)
        checked = valid_name(given) if key == "name" else valid_version(given)
        if given is not None and checked is None:
            what = "a PEP 508 name" if key == "name" else "a PEP 440 version"
            repo.problems.append(f"pyproject.toml: the {key} {str(given)[:80]!r} is not {what}: not used")
        setattr(repo, key, checked)
    repo.requires_python = _requires_python(project.get("requires-python"), repo.problems)
    deps = project.get("dependencies")
    repo.dependencies = [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
    try:
        requirements = read_bounded(root / "requirements.txt", root, MAX_REQUIREMENTS)
    except UnreadableFile as exc:
        repo.problems.append(str(exc))
        requirements = None
    for line in (requirements or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            repo.dependencies.append(line)
    if len(repo.dependencies) > MAX_DEPENDENCIES:
        repo.problems.append(f"{len(repo.dependencies)} dependencies declared: only the first {MAX_DEPENDENCIES} read")
        del repo.dependencies[MAX_DEPENDENCIES:]
    repo.edition = handout_edition(root, repo.version, repo.problems)
    return repo


def _requires_python(value: object, problems: list[str]) -> str | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if value is None:
        return None
    if isinstance(value, str) and len(value) <= 200:
        try:
            SpecifierSet(value)
            return value
        except InvalidSpecifier:
            pass
    problems.append(f"pyproject.toml: requires-python {str(value)[:80]!r} is not a version specifier: ignored")
    return None


def handout_edition(root: Path, version: str | None, problems: list[str] | None = None) -> dict[str, str] | None:
    """The CS336 handout a repository was forked from: its CHANGELOG's newest
    version (1.0.x: the 2025 handout; 26.0.x: 2026), else its pyproject version."""
    source, found = None, None
    try:
        text = read_bounded(root / "CHANGELOG.md", root, MAX_CHANGELOG_READ, truncate=True)
    except UnreadableFile as exc:
        text = None
        if problems is not None:
            problems.append(str(exc))
    match = _CHANGELOG_VERSION.search(text) if text else None
    if match:
        found = ".".join(g for g in match.groups() if g is not None)
        source = "CHANGELOG.md"
    elif version:
        found, source = version, "pyproject.toml"
    if found is None:
        return None
    major = found.split(".")[0]
    edition = {"1": "2025", "26": "2026"}.get(major, "unknown")
    return {"version": found, "edition": edition, "source": source}


def python_accepts(repo: Repository, python_version: str) -> bool:
    """Whether the repository's requires-python admits ``python_version`` (no requirement: yes)."""
    if not repo.requires_python:
        return True
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(repo.requires_python).contains(python_version, prereleases=True)
