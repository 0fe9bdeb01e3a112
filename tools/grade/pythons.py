"""Which Python runs a submission (SPEC §5: a repository whose
``requires-python`` excludes the grader's interpreter is still graded).

In order: ``--python`` (the grader's user chose it: used even when it does
not match, with a warning); the grader's own interpreter when it matches;
else an installed interpreter that matches and has lmspec's runtime (torch,
numpy, msgpack, safetensors) itself: ``python3.X`` on PATH (absolute
folders only, none inside the submission), then pyenv's installed versions.
lmspec never downloads torch for an interpreter: with ``--env auto`` an
environment reuses the grader's torch only on the grader's own Python
version, and another version's environment reuses that interpreter's own
torch (tools/grade/envs.py), so a Python 3.12 or 3.13 without torch is not
chosen. When none matches, the grader's interpreter is used with a warning,
and what then fails to import is the submission's error with the exact
reason (``explain_import_failure``).

Interpreters found here are the grader's user's, never the submission's:
they are run (to ask their version) on the host.
"""

import functools
import os
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from lmspec.tools.grade import envs
from lmspec.tools.grade.repository import Repository, UnreadableFile, python_accepts, read_bounded

_NAME = re.compile(r"^python3\.(\d+)$")


@dataclass
class Choice:
    """The interpreter chosen for a submission, and what the report says about the choice."""

    python: str
    version: str
    warning: str | None = None  # requires-python is not met by it
    note: str | None = None  # how it was found
    looked: list[str] = field(default_factory=list)

    @property
    def mismatch(self) -> bool:
        return self.warning is not None


def candidates(root: Path | None) -> list[Path]:
    """``python3.X`` files on PATH, then under pyenv's versions (absolute
    folders only, never inside the submission's folder), lowest version first."""
    found: dict[str, Path] = {}
    folders = [Path(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.isabs(d)]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if pyenv.is_dir():
        folders += sorted(p / "bin" for p in pyenv.iterdir() if (p / "bin").is_dir())
    real_root = os.path.realpath(root) if root is not None else None
    for folder in folders:
        if real_root and Path(os.path.realpath(folder)).is_relative_to(real_root):
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = folder / name
            if _NAME.match(name) and os.access(path, os.X_OK) and str(path) not in found:
                found[str(path)] = path
    return sorted(found.values(), key=lambda p: int(_NAME.match(p.name).group(1)))  # type: ignore[union-attr]


@functools.cache
def _probe(python: str) -> dict | str:
    try:
        return envs.probe(python)
    except envs.InterpreterError:
        return "does not run"


def choose(repo: Repository | None, given: str | None) -> Choice:
    """The interpreter for ``repo`` (module docstring). envs.InterpreterError
    when ``given`` does not run (the grader's setup)."""
    if given:
        version = envs.probe(given)["version"]
        warning = None
        if repo is not None and not python_accepts(repo, version):
            warning = (
                f"the submission requires Python {repo.requires_python} (its pyproject.toml); graded with "
                f"--python {given} (Python {version}) as asked"
            )
        return Choice(given, version, warning)
    own = platform.python_version()
    if repo is None or python_accepts(repo, own):
        return Choice(sys.executable, own)
    looked = []
    by_minor: dict[int, list[Path]] = {}
    for path in candidates(repo.root):
        minor = int(_NAME.match(path.name).group(1))  # type: ignore[union-attr]
        if any(python_accepts(repo, f"3.{minor}.{micro}") for micro in range(0, 30)):
            by_minor.setdefault(minor, []).append(path)
    for minor, paths in sorted(by_minor.items()):
        runs = [(p, f) for p, f in ((p, _probe(str(p))) for p in paths) if isinstance(f, dict)]
        matching = [(p, f) for p, f in runs if python_accepts(repo, f["version"])]
        ready = [(p, f) for p, f in matching if not f["missing"]]
        if ready:
            path, found = ready[0]
            note = f"graded with {path} (Python {found['version']}): the submission requires {repo.requires_python}"
            return Choice(str(path), found["version"], note=note, looked=looked)
        if matching:
            path, found = matching[0]
            looked.append(f"{path} (Python {found['version']}) has no {', '.join(found['missing'])}")
        elif not runs:
            looked.append(f"python3.{minor} ({', '.join(map(str, paths))}) does not run")
    tried = "; ".join(looked) if looked else "no python3.X on PATH or in pyenv matches"
    warning = (
        f"the submission requires Python {repo.requires_python} (its pyproject.toml) and no matching interpreter "
        f"with torch is installed ({tried}); graded with Python {own} ({sys.executable}): what needs a newer "
        "Python fails; rerun with --python PATH"
    )
    return Choice(sys.executable, own, warning, looked=looked)


_PEP695 = (
    (re.compile(r"^\s*type\s+[A-Za-z_]\w*\s*(\[[^\]]*\])?\s*="), "PEP 695 syntax (a type alias statement)", "3.12"),
    (re.compile(r"^\s*(async\s+)?def\s+\w+\s*\["), "PEP 695 syntax (a generic function)", "3.12"),
    (re.compile(r"^\s*class\s+\w+\s*\["), "PEP 695 syntax (a generic class)", "3.12"),
)


def explain_import_failure(
    import_error: dict | None, repo: Repository, choice: Choice, declared: str | None = None
) -> str | None:
    """Why a submission failed to import on an interpreter its requires-python
    excludes, with the fix; None when the failure is not an import failure.
    ``declared``: the requirement that provides the missing module, when the
    repository declares it (then --env auto is the likeliest way out)."""
    if not isinstance(import_error, dict):
        return None
    kind, file, line = import_error.get("type"), import_error.get("file"), import_error.get("line")
    where = f"{file}:{line}" if file else "the adapter"
    fix = f"rerun with --python PATH (an interpreter that matches requires-python {repo.requires_python} and has torch)"
    if declared is not None:
        fix = f"rerun with --env auto (it installs {declared}, which the repository declares), or {fix[6:]}"
    if kind == "SyntaxError":
        text = _source_line(repo.root, file, line)
        for pattern, feature, needs in _PEP695:
            if text is not None and pattern.match(text):
                return f"{where} uses {feature}: needs Python >= {needs}; graded with Python {choice.version}; {fix}"
        return (
            f"{where}: SyntaxError under Python {choice.version}: its syntax needs Python "
            f"{repo.requires_python} (its requires-python); {fix}"
        )
    message = str(import_error.get("message") or "").splitlines()[0][:300] if import_error.get("message") else ""
    return (
        f"the adapter failed to import under Python {choice.version}: {where}: {kind}: {message}; the submission "
        f"requires Python {repo.requires_python}; {fix}"
    )


def _source_line(root: Path, file: object, line: object) -> str | None:
    """Line ``line`` of the submission's ``file`` (read bounded, inside the root only)."""
    if not isinstance(file, str) or not isinstance(line, int) or line < 1:
        return None
    path = Path(file)
    if not path.is_absolute() or not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root)):
        return None
    try:
        text = read_bounded(path, root, 4 << 20)
    except UnreadableFile:
        return None
    lines = (text or "").splitlines()
    return lines[line - 1] if line <= len(lines) else None
