"""What the graded repository says about itself: its distribution name and
version, the Python it requires, its declared dependencies, and the CS336
handout edition it was forked from (its CHANGELOG.md). Read from files only;
nothing of the submission is imported here."""

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

_CHANGELOG_VERSION = re.compile(r"^#+\s*\[?v?(\d+)\.(\d+)(?:\.(\d+))?\]?", re.M)


@dataclass
class Repository:
    root: Path
    name: str | None = None
    version: str | None = None
    requires_python: str | None = None
    dependencies: list[str] = field(default_factory=list)
    edition: dict[str, str] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "root": str(self.root),
            "name": self.name,
            "version": self.version,
            "requires_python": self.requires_python,
            "dependencies": self.dependencies,
            "handout": self.edition,
        }


def inspect(root: Path) -> Repository:
    repo = Repository(root)
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        data = {}
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    repo.name = project.get("name") or poetry.get("name")
    repo.version = project.get("version") if isinstance(project.get("version"), str) else poetry.get("version")
    repo.requires_python = project.get("requires-python") if isinstance(project.get("requires-python"), str) else None
    deps = project.get("dependencies")
    repo.dependencies = [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
    requirements = root / "requirements.txt"
    if requirements.is_file():
        for line in requirements.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                repo.dependencies.append(line)
    repo.edition = handout_edition(root, repo.version)
    return repo


def handout_edition(root: Path, version: str | None) -> dict[str, str] | None:
    """The CS336 handout a repository was forked from: its CHANGELOG's newest
    version (1.0.x: the 2025 handout; 26.0.x: 2026), else its pyproject version."""
    source, found = None, None
    try:
        match = _CHANGELOG_VERSION.search((root / "CHANGELOG.md").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        match = None
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


def python_problem(repo: Repository, python_version: str, python: str) -> str | None:
    """Why ``python`` (of version ``python_version``) cannot run the
    submission, by its requires-python; None when it can."""
    if not repo.requires_python:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        accepted = SpecifierSet(repo.requires_python)
    except InvalidSpecifier:
        return None
    if accepted.contains(python_version, prereleases=True):
        return None
    return (
        f"the submission requires Python {repo.requires_python} (its pyproject.toml); the worker would run "
        f"Python {python_version} ({python}); rerun with --python pointing at a matching interpreter "
        f"(one that has torch installed, or with --env auto)"
    )
