"""Per-submission environments (``--env auto``).

A submission may declare dependencies the grader's environment lacks
(pydantic, omegaconf, heapdict, rich...). ``prepare`` gives its worker an
environment of its own, built once per (declared requirements, worker
Python, grader environment) and cached:

- a venv made with the worker's interpreter;
- when that interpreter is the grader's own Python version, a ``.pth`` file
  that puts the grader's site-packages behind the venv's, so torch and the
  scientific stack are reused, never downloaded;
- the declared dependencies that are missing from both, installed with pip
  under a constraints file that pins every distribution the grader already
  has (a dependency that would replace the grader's numpy or torch is not
  installed, and says so);
- torch and its companions are never installed: the submission runs on the
  grader's torch whatever version it pins (reported as a note);
- the submission's own distribution metadata (name, version) in the venv's
  site-packages, so ``importlib.metadata.version(...)`` works as if it were
  installed; its code is not copied (the worker imports it from its folder).

Nothing is installed into the grader's own environment.
"""

import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmspec.tools.grade.repository import Repository

#: Never installed for a submission: the grader's builds are used.
NEVER_INSTALL = frozenset(
    {"torch", "torchvision", "torchaudio", "triton", "numpy", "msgpack", "safetensors", "jaxtyping", "beartype"}
)
_RUNTIME = ("torch", "numpy", "msgpack", "safetensors")


class EnvError(RuntimeError):
    """The environment cannot be prepared (the message says what to do)."""


@dataclass
class Env:
    python: str
    path: Path | None  # None: the interpreter as it is
    report: dict[str, Any] = field(default_factory=dict)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def probe(python: str) -> dict[str, Any]:
    """Version of ``python`` and which of lmspec's runtime needs it lacks."""
    code = (
        "import importlib.util, json, platform, sys; "
        f"print(json.dumps({{'version': platform.python_version(), 'missing': "
        f"[m for m in {list(_RUNTIME)!r} if importlib.util.find_spec(m) is None]}}))"
    )
    try:
        out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=True)
        return json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise EnvError(f"--python {python}: cannot run it ({exc})") from exc


def _grader_site_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(p for p in (paths.get("purelib"), paths.get("platlib")) if p))


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def plan(repo: Repository, python_version: str) -> tuple[list[str], list[str]]:
    """(requirements to install, notes about the others) for the worker's Python."""
    from packaging.requirements import InvalidRequirement, Requirement

    install, notes = [], []
    env = {"python_version": ".".join(python_version.split(".")[:2]), "python_full_version": python_version}
    for text in repo.dependencies:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            notes.append(f"{text!r}: not a requirement lmspec understands (skipped)")
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = _normalize(req.name)
        have = _installed(req.name)
        if name in NEVER_INSTALL:
            if req.specifier and have and not req.specifier.contains(have, prereleases=True):
                notes.append(f"{text}: graded with the grader's {req.name} {have}")
            continue
        if have is not None:
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                notes.append(f"{text}: the grader's {req.name} {have} is used")
            continue
        install.append(text)
    return install, notes


def _constraints() -> str:
    """Every distribution the grader has, pinned (pip -c)."""
    lines = []
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name")
        if name and dist.version:
            lines.append(f"{name}=={dist.version}")
    return "\n".join(sorted(set(lines))) + "\n"


def _write_metadata(site: Path, repo: Repository) -> None:
    if not repo.name:
        return
    normalized = re.sub(r"[-_.]+", "_", repo.name)
    info = site / f"{normalized}-{repo.version or '0+unknown'}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {repo.name}\nVersion: {repo.version or '0+unknown'}\n"
    )
    (info / "INSTALLER").write_text("lmspec\n")


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise EnvError(f"no site-packages in {venv}")
    return found[0]


def cache_root(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lmspec" / "envs"


def prepare(repo: Repository, python: str, cache: Path, log: Any = None) -> Env:
    """The worker's interpreter for this submission (building its venv when needed)."""
    info = probe(python)
    version = str(info["version"])
    same_python = version == ".".join(map(str, sys.version_info[:3]))
    if info["missing"] and not same_python:
        raise EnvError(
            f"--python {python} (Python {version}) lacks {', '.join(info['missing'])}: lmspec's worker needs "
            f"{', '.join(_RUNTIME)} in that interpreter. Install them there (torch: the CPU build, "
            "pip install torch --index-url https://download.pytorch.org/whl/cpu), or use the grader's Python"
        )
    install, notes = plan(repo, version)
    report: dict[str, Any] = {"python": python, "python_version": version, "installed": [], "notes": notes}
    if not install and (repo.name is None or _installed(repo.name) is not None or not same_python):
        return Env(python, None, report | {"venv": None})
    key_material = json.dumps(
        [sorted(install), repo.name, repo.version, version, python, sorted(_grader_site_dirs()) if same_python else []]
    )
    key = hashlib.sha256(key_material.encode()).hexdigest()[:16]
    venv = cache / key
    marker = venv / "lmspec-env.json"
    if marker.is_file():
        cached = json.loads(marker.read_text())
        return Env(str(venv / "bin" / "python"), venv, cached | {"cached": True})
    if log:
        log(f"building an environment for the submission in {venv} ({len(install)} package(s) to install)")
    venv.parent.mkdir(parents=True, exist_ok=True)
    args = [python, "-m", "venv", *([] if install else ["--without-pip"]), str(venv)]
    subprocess.run(args, check=True, capture_output=True)
    site = _site_packages(venv)
    if same_python:
        (site / "_lmspec_grader_site.pth").write_text("\n".join(_grader_site_dirs()) + "\n")
    _write_metadata(site, repo)
    failed = []
    if install:
        constraints = venv / "constraints.txt"
        constraints.write_text(_constraints())
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(constraints)]
        proc = subprocess.run([*pip, *install], capture_output=True, text=True)
        if proc.returncode != 0:  # one at a time, to keep what can be installed
            for req in install:
                one = subprocess.run([*pip, req], capture_output=True, text=True)
                if one.returncode != 0:
                    failed.append(f"{req}: {(one.stderr.strip().splitlines() or ['pip failed'])[-1]}")
    report |= {"venv": str(venv), "installed": [r for r in install if not any(f.startswith(r) for f in failed)]}
    report["notes"] = notes + [f"not installed: {f}" for f in failed]
    marker.write_text(json.dumps(report))
    return Env(str(venv / "bin" / "python"), venv, report)
