"""Per-submission environments (``--env auto``), built in a sandbox of their own.

A submission may declare dependencies the grader's environment lacks
(pydantic, omegaconf, heapdict, rich...). ``prepare`` gives its worker an
environment of its own, built once per (declared requirements, worker
Python, grader environment) and cached:

- a venv made with the worker's interpreter; when that interpreter is the
  grader's own Python version, a ``.pth`` file puts the grader's
  site-packages behind the venv's, so torch and the scientific stack are
  reused, never downloaded; another interpreter (a Python the repository's
  requires-python asks for) is used only when it has torch itself, and its
  venv sees its own site-packages (``--system-site-packages``);
- the declared dependencies missing from it, installed under a constraints
  file that pins every distribution the interpreter already has (torch and
  its companions are never installed: the submission runs on the grader's
  torch whatever version it pins, and a note says so);
- a dependency that is a path of the repository (``name @ file:///...``)
  is built from a copy; a direct reference to anything else (a URL, a path
  outside the repository) is not installed.

Building, installing and probing an environment runs the submission's code
(a build backend, ``setup.py``, a ``.pth`` file of a wheel runs whenever
that environment's interpreter starts), so every step runs in bubblewrap
(tools/grade/envstep.py), and the grader never starts the environment's
interpreter itself:

1. create (no network): the venv, by the chosen interpreter;
2. resolve and download (network, for the package index only): the
   venv's pip, which holds nothing of the submission yet, resolves the
   requirements from wheels only (``--only-binary :all:``: no build, so no
   code of the submission or of a dependency runs) and downloads them,
   with the grader's pip configuration (index, find-links, proxy);
3. install (no network): pip installs from those wheels only, and builds
   the repository's own local dependencies: here the submission's code runs;
4. probe (no network): the environment's interpreter says its version and
   whether lmspec's runtime imports; the grader reads that JSON as data.

Each sandbox sees the system read-only, the interpreter's folders
read-only, the repository read-only, the venv folder (written only in steps
1 and 3) and a scratch folder; no grader variable (an allow-list), nothing
of the host's home or /tmp (its /tmp is a tmpfs of its own), and it has
time, memory and file-size limits; every process it starts dies with it.
The venv is built under a temporary name, bound at its final path, and
renamed into place by the grader; the grader's own record of it
(``KEY.json``) lies beside it in the cache folder, never inside it.
"""

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmspec.conformance.judge import sandbox as worker_sandbox
from lmspec.conformance.plain import plain
from lmspec.tools.grade.files import inside
from lmspec.tools.grade.repository import (
    MAX_PYPROJECT,
    Repository,
    UnreadableFile,
    parse_toml,
    read_bounded,
    valid_name,
)

#: Never installed for a submission: the grader's builds are used.
NEVER_INSTALL = frozenset(
    {"torch", "torchvision", "torchaudio", "triton", "numpy", "msgpack", "safetensors", "jaxtyping", "beartype"}
)
_RUNTIME = ("torch", "numpy", "msgpack", "safetensors")
#: Part of every cache key: environments of an older build procedure are never reused.
BUILD_FORMAT = 2
#: Largest environment kept (bytes on disk, the grader's site-packages not counted).
MAX_ENV_BYTES = 4 << 30
#: Limits of each build step (seconds), within the grading's own --timeout.
STEP_SECONDS = {"create": 300, "resolve": 600, "download": 600, "install": 900, "probe": 120}
#: A local dependency is copied and digested: at most this many files and bytes.
MAX_LOCAL_FILES, MAX_LOCAL_BYTES = 5000, 256 << 20
_STEP = Path(__file__).resolve().parent / "envstep.py"
_SANDBOX_STEP = "/opt/lmspec-env/envstep.py"
#: Variables of the grader that reach the network step (pip's index and proxy), and no other step.
_NETWORK_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
#: Files of /etc the network step needs to resolve names and check certificates.
_NETWORK_ETC = ("resolv.conf", "hosts", "host.conf", "gai.conf", "ssl", "ca-certificates", "pki")


class EnvError(RuntimeError):
    """The submission's environment cannot be made (the submission's error; the message says why)."""


class InterpreterError(RuntimeError):
    """An interpreter the grader was given cannot run lmspec's worker (the grader's setup)."""


@dataclass
class Env:
    python: str
    path: Path | None  # None: the interpreter as it is
    report: dict[str, Any] = field(default_factory=dict)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def probe(python: str) -> dict[str, Any]:
    """Version of ``python`` and which of lmspec's runtime needs it lacks. Only
    for interpreters the grader chose (never a submission's environment)."""
    code = (
        "import importlib.util, json, platform, sys; "
        f"print(json.dumps({{'version': platform.python_version(), 'missing': "
        f"[m for m in {list(_RUNTIME)!r} if importlib.util.find_spec(m) is None]}}))"
    )
    try:
        out = subprocess.run(
            [python, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd="/"
        )
        found = json.loads(out.stdout)
        return {"version": str(found["version"]), "missing": [str(m) for m in found["missing"]]}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as exc:
        raise InterpreterError(f"--python {python}: cannot run it ({exc})") from exc


def _same_python(version: str) -> bool:
    return version == ".".join(map(str, sys.version_info[:3]))


def _grader_site_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(p for p in (paths.get("purelib"), paths.get("platlib")) if p))


def distributions(python: str, version: str) -> dict[str, str]:
    """{normalized name: version} of what ``python`` (a trusted interpreter) has installed."""
    if _same_python(version) and os.path.realpath(python) == os.path.realpath(sys.executable):
        found = {}
        for dist in importlib.metadata.distributions():
            name = dist.metadata.get("Name")
            if name and dist.version:
                found.setdefault(_normalize(name), dist.version)
        return found
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata.get('Name'): d.version for d in m.distributions() if d.metadata.get('Name')}))"
    )
    try:
        out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=True)
        return {_normalize(str(k)): str(v) for k, v in json.loads(out.stdout).items()}
    except (OSError, subprocess.SubprocessError, ValueError, AttributeError) as exc:
        raise InterpreterError(f"--python {python}: cannot list its distributions ({exc})") from exc


@dataclass
class Plan:
    """What an environment needs: requirements from the index, local
    dependencies (requirement name, folder or archive of the repository),
    build requirements of those, and notes about the rest."""

    index: list[str] = field(default_factory=list)
    local: list[tuple[str, str]] = field(default_factory=list)
    build: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.index and not self.local


def plan(repo: Repository, python_version: str, installed: dict[str, str] | None = None) -> Plan:
    """The Plan for the repository's declared dependencies on the worker's Python."""
    from packaging.requirements import InvalidRequirement, Requirement

    have_all = installed if installed is not None else distributions(sys.executable, python_version)
    out = Plan()
    env = {"python_version": ".".join(python_version.split(".")[:2]), "python_full_version": python_version}
    for text in repo.dependencies:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            out.notes.append(f"{text[:200]!r}: not a requirement lmspec understands (skipped)")
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = _normalize(req.name)
        have = have_all.get(name)
        if req.url is not None:
            local, why = _local_source(req.url, repo.root)
            if local is None:
                out.notes.append(f"{req.name}: {why}: not installed")
            else:
                out.local.append((req.name, str(local)))
                _local_requirements(local, repo.root, out)
            continue
        if name in NEVER_INSTALL:
            if req.specifier and have and not req.specifier.contains(have, prereleases=True):
                out.notes.append(f"{text}: graded with the grader's {req.name} {have}")
            continue
        if have is not None:
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                out.notes.append(f"{text}: the grader's {req.name} {have} is used")
            continue
        out.index.append(str(req))
    if out.local:
        out.build = list(dict.fromkeys(["setuptools", "wheel", *out.build]))
    return out


def _local_source(url: str, root: Path) -> tuple[Path | None, str]:
    """(the repository path a ``file:`` URL names, "") or (None, why it is not used)."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None, "a direct reference outside the package index (lmspec installs from the index and the repository)"
    path = Path(unquote(parsed.path))
    if not path.is_absolute():
        path = root / path
    real = Path(os.path.realpath(path))
    if ".." in path.parts or not real.is_relative_to(os.path.realpath(root)):
        return None, f"{str(path)[:200]} is outside the repository"
    if not (real.is_dir() or real.is_file()):
        return None, f"{str(path)[:200]} is not in the repository"
    return real, ""


def _local_requirements(source: Path, root: Path, out: Plan) -> None:
    """A local dependency's static dependencies and build requirements (read as data)."""
    from packaging.requirements import InvalidRequirement, Requirement

    if not source.is_dir():
        return
    try:
        text = read_bounded(source / "pyproject.toml", root, MAX_PYPROJECT)
        data = parse_toml(text, "pyproject.toml") if text else {}
    except UnreadableFile as exc:
        out.notes.append(f"{source.name}: {exc}")
        return
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    build = data.get("build-system") if isinstance(data.get("build-system"), dict) else {}
    for key, target in ((project.get("dependencies"), out.index), (build.get("requires"), out.build)):
        for item in key if isinstance(key, list) else []:
            try:
                req = Requirement(item) if isinstance(item, str) else None
            except InvalidRequirement:
                req = None
            if req is not None and req.url is None and _normalize(req.name) not in NEVER_INSTALL:
                target.append(str(req))


def _constraints(installed: dict[str, str]) -> str:
    """Every distribution the interpreter has, pinned (pip -c)."""
    return "".join(f"{name}=={version}\n" for name, version in sorted(installed.items()))


def _tree_digest(path: Path) -> str:
    """sha256 of a local dependency (its files' paths and contents; links as their targets' text)."""
    h = hashlib.sha256()
    if path.is_file():
        if path.stat().st_size > MAX_LOCAL_BYTES:
            raise EnvError(f"the local dependency {path.name} is over {MAX_LOCAL_BYTES >> 20} MiB")
        h.update(path.read_bytes())
        return h.hexdigest()
    files = total = 0
    for folder, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            full = os.path.join(folder, name)
            files += 1
            h.update(os.path.relpath(full, path).encode(errors="surrogateescape") + b"\0")
            if os.path.islink(full):
                h.update(b"link:" + os.readlink(full).encode(errors="surrogateescape"))
            elif os.path.isfile(full):
                total += os.path.getsize(full)
                if total > MAX_LOCAL_BYTES or files > MAX_LOCAL_FILES:
                    raise EnvError(
                        f"the local dependency {path.name} is over {MAX_LOCAL_FILES} files or "
                        f"{MAX_LOCAL_BYTES >> 20} MiB"
                    )
                with open(full, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def cache_root(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lmspec" / "envs"


# --- running one step -----------------------------------------------------------------------------------
Bind = str | tuple[str, str]


def _pair(bind: Bind) -> tuple[str, str]:
    return (bind, bind) if isinstance(bind, str) else bind


@dataclass
class Builder:
    """How the steps of one build run: sandboxed or not, within a deadline and a memory limit."""

    python: str  # the interpreter that makes the venv (trusted)
    bwrap: bool
    deadline: float
    memory_gb: float | None = 4.0
    seconds: dict[str, float] = field(default_factory=dict)  # per step

    def run(
        self,
        step: str,
        argv: list[str],
        *,
        writable: tuple[Bind, ...] = (),
        readable: tuple[Bind, ...] = (),
        network: bool = False,
        extra_env: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """(exit status, the tail of its output) of ``argv`` as step ``step``;
        EnvError when it runs out of time. A bind is a path (the same inside
        and out) or (host path, path inside): without bubblewrap the host
        path stands in for the other in ``argv``."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise EnvError(f"building the environment ran out of time before its {step} step")
        limit = min(STEP_SECONDS[step], left)
        scratch = Path(tempfile.mkdtemp(prefix="lmspec-envstep-"))
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            **(extra_env or {}),
        }
        try:
            if self.bwrap:
                env |= {"HOME": "/tmp/home", "TMPDIR": "/tmp"}
                cmd = self._bwrap(argv, env, writable, readable, network)
                popen_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            else:
                (scratch / "home").mkdir()
                env |= {"HOME": str(scratch / "home"), "TMPDIR": str(scratch)}
                cmd = [a.replace(_SANDBOX_STEP, str(_STEP)) for a in argv]
                for host, inner in map(_pair, (*writable, *readable)):
                    cmd = [a.replace(inner, host) for a in cmd]
                popen_env = env
            begun = time.monotonic()
            result = _run_bounded(cmd, popen_env, scratch, limit, self.memory_gb, step)
            self.seconds[step] = round(self.seconds.get(step, 0.0) + time.monotonic() - begun, 2)
            return result
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _bwrap(
        self,
        argv: list[str],
        env: dict[str, str],
        writable: tuple[Bind, ...],
        readable: tuple[Bind, ...],
        network: bool,
    ) -> list[str]:
        cmd = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-all"]
        if network:
            cmd.append("--share-net")
        cmd += ["--hostname", "lmspec-env", "--clearenv", "--proc", "/proc", *worker_sandbox.dev_args(64)]
        cmd += ["--size", str(2 << 30), "--tmpfs", "/tmp"]
        cmd += worker_sandbox.system_binds()
        if network:
            for name in _NETWORK_ETC:
                if os.path.exists(f"/etc/{name}"):
                    cmd += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        bound, _ = worker_sandbox._interpreter_dirs(self.python)
        for d in bound:
            cmd += ["--ro-bind", d, d]
        for host, inner in map(_pair, readable):
            cmd += ["--ro-bind", host, inner]
        for host, inner in map(_pair, writable):
            cmd += ["--bind", host, inner]
        cmd += ["--ro-bind", str(_STEP), _SANDBOX_STEP]
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return [*cmd, "--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/tmp", "--", *argv]


def _limits(memory_gb: float | None, seconds: float) -> Any:
    def apply() -> None:
        import ctypes
        import resource

        wanted = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 1 << 30), (resource.RLIMIT_CPU, int(seconds) + 1)]
        if memory_gb:
            wanted.append((resource.RLIMIT_AS, int(memory_gb * (1 << 30))))
        for res, value in wanted:
            _, hard = resource.getrlimit(res)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(res, (value, value))
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return apply


def _run_bounded(
    cmd: list[str], env: dict[str, str], cwd: Path, seconds: float, memory_gb: float | None, step: str
) -> tuple[int, str]:
    """Run ``cmd`` in a session of its own; its output is drained and only its last 8 KB kept."""
    tail: deque[bytes] = deque(maxlen=64)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=_limits(memory_gb, seconds),
    )
    assert proc.stdout is not None

    def drain() -> None:
        for chunk in iter(lambda: proc.stdout.read(128), b""):
            tail.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise EnvError(f"building the environment: its {step} step took over {seconds:.0f} s (stopped)") from None
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything it left behind (without bubblewrap)
        reader.join(timeout=5)
        proc.stdout.close()
    return proc.returncode, clean_text(b"".join(tail).decode("utf-8", "replace"))


def clean_text(text: str, limit: int = 8000) -> str:
    """Submission-made text for a report: no control characters but newline and tab, at most ``limit``."""
    return plain(text)[-limit:]


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "pip failed"


def _read_json(path: Path, folder: Path, limit: int = 1 << 20) -> Any:
    """A JSON file a step wrote, read as data (bounded, no link followed); None when unusable."""
    try:
        text = read_bounded(path, folder, limit)
        return json.loads(text) if text is not None else None
    except (UnreadableFile, ValueError, RecursionError, MemoryError):
        return None


# --- the build ---------------------------------------------------------------------------------------------
_PROBE = (
    "import importlib.util, json, platform, sys; "
    "json.dump({'version': platform.python_version(), 'missing': "
    f"[m for m in {list(_RUNTIME)!r} if importlib.util.find_spec(m) is None]}}, open(sys.argv[1], 'w'))"
)


def pip_configuration(python: str) -> tuple[dict[str, str], list[str]]:
    """The grader's pip configuration as PIP_* variables, and the local
    folders it names (find-links, file:// indexes, certificates), for the
    network step: asked of the interpreter's own pip (trusted)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in _NETWORK_VARIABLES}
    try:
        out = subprocess.run(
            [python, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, cwd="/"
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        match = re.match(r"^[\w:.-]*?\.([\w-]+)='(.*)'$", line.strip())
        if match:
            env.setdefault("PIP_" + match.group(1).upper().replace("-", "_"), match.group(2))
    folders = []
    for value in env.values():
        for word in value.split():
            path = word[len("file://") :] if word.startswith("file://") else word
            if path.startswith("/") and os.path.exists(path):
                folders.append(os.path.realpath(path))
                if word.startswith("file://") and os.path.isdir(path):
                    folders += index_file_folders(Path(path))
    return env, sorted(set(folders))


#: Project pages of a file:// index read to find where its files lie.
_INDEX_SAMPLE = 64
_HREF = re.compile(r"""href\s*=\s*["']([^"'#?]+)""", re.IGNORECASE)


def index_file_folders(index: Path, sample: int = _INDEX_SAMPLE) -> list[str]:
    """The local folders the pages of a ``file://`` package index link to
    (a mirror's ``simple/NAME/index.html`` names ``../../files/NAME.whl``): the
    download step's sandbox needs them as well as the index. Read from up to
    ``sample`` project pages (a mirror keeps its files in one or a few folders)."""
    found: set[str] = set()
    try:
        projects = sorted(p for p in index.iterdir() if p.is_dir())[:sample]
    except OSError:
        return []
    for project in projects:
        page = project / "index.html"
        try:
            text = page.read_text(encoding="utf-8", errors="replace")[: 1 << 20]
        except OSError:
            continue
        for href in _HREF.findall(text):
            if "://" in href and not href.startswith("file://"):
                continue
            target = href[len("file://") :] if href.startswith("file://") else os.path.join(project, href)
            folder = os.path.realpath(os.path.dirname(target))
            if os.path.isdir(folder) and not Path(folder).is_relative_to(os.path.realpath(index)):
                found.add(folder)
    return sorted(found)


def prepare(
    repo: Repository,
    python: str,
    cache: Path,
    *,
    bwrap: bool = True,
    memory_gb: float | None = 4.0,
    seconds: float = 1800.0,
    log: Any = None,
) -> Env:
    """The worker's interpreter for this submission (building its venv when needed).
    EnvError: the environment cannot be made (the submission's error)."""
    started = time.monotonic()
    info = probe(python)
    version = info["version"]
    same_python = _same_python(version)
    if info["missing"] and not same_python:
        raise InterpreterError(
            f"--python {python} (Python {version}) lacks {', '.join(info['missing'])}: lmspec's worker needs "
            f"{', '.join(_RUNTIME)} in that interpreter. Install them there (torch: the CPU build, "
            "pip install torch --index-url https://download.pytorch.org/whl/cpu), or use the grader's Python"
        )
    installed = distributions(python, version)
    wanted = plan(repo, version, installed)
    report: dict[str, Any] = {
        "python": python,
        "base_python": python,
        "python_version": version,
        "installed": [],
        "notes": list(wanted.notes),
        "sandbox": "bwrap" if bwrap else "none",
    }
    if wanted.empty:
        return Env(python, None, report | {"venv": None})
    key = _cache_key(wanted, version, python, installed, same_python)
    cache.mkdir(parents=True, exist_ok=True)
    venv, marker = inside(cache, cache / key), inside(cache, cache / f"{key}.json")
    if marker.is_file() and venv.is_dir() and not venv.is_symlink():
        cached = _read_json(marker, cache)
        if isinstance(cached, dict) and cached.get("venv") == str(venv):
            notes = [*(cached.get("notes") or []), *incomplete_distributions(venv)]
            return Env(str(venv / "bin" / "python"), venv, cached | {"cached": True, "notes": notes})
    if log:
        count = len(wanted.index) + len(wanted.local)
        log(f"building an environment for the submission in {venv} ({count} to install)")
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache))
    work = Path(tempfile.mkdtemp(prefix="lmspec-env-"))
    builder = Builder(python, bwrap, started + seconds, memory_gb)
    try:
        report |= _build(builder, wanted, repo, staging, venv, work, installed, same_python)
        if _size(staging) > MAX_ENV_BYTES:
            raise EnvError(f"the environment is larger than {MAX_ENV_BYTES >> 30} GiB")
        report |= {"venv": str(venv), "build_s": round(time.monotonic() - started, 1), "steps_s": builder.seconds}
        _publish(staging, venv, marker, report, cache / f".{key}.json.tmp", cache)
        return Env(str(venv / "bin" / "python"), venv, report)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _cache_key(wanted: Plan, version: str, python: str, installed: dict[str, str], same_python: bool) -> str:
    """What the environment is built from, hashed: its requirements, its local
    dependencies' contents, the interpreter, and the grader's own distributions
    (the constraints: a change of the grader's environment builds anew)."""
    try:
        locals_digest = [(name, _tree_digest(Path(path))) for name, path in wanted.local]
    except OSError as exc:
        raise EnvError(f"a local dependency cannot be read: {exc.strerror}: {exc.filename}") from None
    key_material = json.dumps(
        [
            BUILD_FORMAT,
            sorted(wanted.index),
            sorted(wanted.build),
            locals_digest,
            version,
            os.path.realpath(python),
            _grader_site_dirs() if same_python else [],
            sorted(installed.items()),
        ]
    )
    return hashlib.sha256(key_material.encode()).hexdigest()[:20]


def _publish(staging: Path, venv: Path, marker: Path, report: dict[str, Any], tmp: Path, cache: Path) -> None:
    """The built environment to its final place, then its cache record (written last: a
    venv without its record is a build that never finished)."""
    if venv.is_symlink():
        venv.unlink()
    elif venv.exists() and not marker.is_file():  # a build that never finished
        shutil.rmtree(venv, ignore_errors=True)
    try:
        os.rename(staging, venv)
    except OSError:  # another grader built the same environment meanwhile: keep theirs
        shutil.rmtree(staging, ignore_errors=True)
    tmp = inside(cache, tmp)
    tmp.write_text(json.dumps(report), encoding="utf-8")
    os.replace(tmp, marker)


def _build(
    builder: Builder,
    wanted: Plan,
    repo: Repository,
    staging: Path,
    venv: Path,
    work: Path,
    installed: dict[str, str],
    same_python: bool,
) -> dict[str, Any]:
    """Steps 1-4 of the module docstring; the report's installed and notes."""
    python = builder.python
    bind: tuple[Bind, ...] = ((str(staging), str(venv)),)  # the venv is built at its final path
    wheels, out, pip_cache = work / "wheels", work / "out", work / "pip-cache"
    for folder in (wheels, out, pip_cache):
        folder.mkdir()
    constraints = work / "constraints.txt"
    constraints.write_text(_constraints(installed), encoding="utf-8")
    vpython = _create_venv(builder, venv, bind, same_python)
    pip = [vpython, "-m", "pip"]
    # 2. resolve and download: wheels only, nothing built, nothing of the submission's
    network_env, config_dirs = pip_configuration(python)
    network_env["PIP_CACHE_DIR"] = str(pip_cache)  # the download step takes what the resolve step fetched
    network = _Network(builder, pip, (*bind, str(constraints), *config_dirs), network_env, pip_cache)
    failed, fetch = _resolve(network, wanted.index, constraints, out)
    notes = _download(network, fetch, wanted.build, wheels)
    done = _install(builder, wanted, repo, venv, bind, wheels, constraints, failed)
    _probe_env(builder, vpython, work, bind)
    notes += [f"not installed: {req}: {why}" for req, why in failed.items()]
    notes += incomplete_distributions(staging)
    return {"installed": done, "notes": [*wanted.notes, *notes]}


#: Distributions and RECORD sizes read when checking an environment.
_MAX_DISTRIBUTIONS, _MAX_RECORD = 500, 8 << 20


def incomplete_distributions(venv: Path) -> list[str]:
    """Notes for distributions of ``venv`` installed but incomplete: files
    their RECORD names are not on disk (an interrupted install, a cache
    cleaned by hand), read as text only."""
    notes = []
    for info in sorted(venv.glob("lib/python*/site-packages/*.dist-info"))[:_MAX_DISTRIBUTIONS]:
        record = info / "RECORD"
        try:
            if record.is_symlink() or not record.is_file() or record.stat().st_size > _MAX_RECORD:
                continue
            rows = record.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        site = info.parent
        named = [row.split(",")[0] for row in rows if row.strip()]
        inside = [n for n in named if n and not n.startswith(("..", "/"))]
        missing = [n for n in inside if not os.path.lexists(site / n)]
        if missing:
            name = plain(info.name.removesuffix(".dist-info").replace("-", " ", 1))[:100]
            notes.append(
                f"installed but incomplete: {name}: {len(missing):,} of the {len(inside):,} files its RECORD names "
                f"are missing (e.g. {plain(missing[0])[:200]}); imports of it fail: remove the environment ({venv}) "
                "and grade again to rebuild it"
            )
    return notes


def _create_venv(builder: Builder, venv: Path, bind: tuple[Bind, ...], same_python: bool) -> str:
    """1. create: the venv (seeing the grader's site folders when it runs the grader's Python); its python."""
    pth = [a for d in _grader_site_dirs() for a in ("--pth", d)] if same_python else ["--system-site"]
    rc, output = builder.run("create", [builder.python, _SANDBOX_STEP, "create", str(venv), *pth], writable=bind)
    if rc != 0:
        raise EnvError(f"the environment's venv could not be made: {_last_line(output)}")
    return str(venv / "bin" / "python")


@dataclass(frozen=True)
class _Network:
    """What the two network steps share: the builder, pip, what they read, their environment, pip's cache."""

    builder: Builder
    pip: list[str]
    readable: tuple[Bind, ...]
    env: dict[str, str]
    pip_cache: Path


def _resolve(network: _Network, index: list[str], constraints: Path, out: Path) -> tuple[dict[str, str], list[str]]:
    """2a. What pip would install for the index requirements (wheels only, a dry run);
    a batch that fails is retried one requirement at a time. (failed -> why, name==version to fetch)"""
    failed: dict[str, str] = {}
    to_fetch: list[str] = []
    if not index:
        return failed, to_fetch
    batches = [index]
    for batch in batches:
        report = out / "resolve.json"
        report.unlink(missing_ok=True)
        args = [*network.pip, "install", "--dry-run", "--only-binary", ":all:", "--report", str(report)]
        rc, output = network.builder.run(
            "resolve",
            [*args, "-c", str(constraints), *batch],
            writable=(str(out), str(network.pip_cache)),
            readable=network.readable,
            network=True,
            extra_env=network.env,
        )
        if rc != 0 and len(batch) > 1:  # one at a time, to keep what can be installed
            batches += [[req] for req in batch]
            continue
        if rc != 0:
            failed[batch[0]] = _last_line(output)
            continue
        to_fetch += _resolved(_read_json(report, out, 64 << 20))
    return failed, sorted(set(to_fetch))


def _download(network: _Network, fetch: list[str], build: list[str], wheels: Path) -> list[str]:
    """2b. The resolved wheels (no dependencies) and the build requirements; notes on what failed."""
    notes: list[str] = []
    if not (fetch or build):
        return notes
    args = [*network.pip, "download", "--only-binary", ":all:", "-d", str(wheels)]
    for what, extra in (("index", ["--no-deps", *fetch]), ("build", build)):
        if (what == "index" and not fetch) or (what == "build" and not build):
            continue
        rc, output = network.builder.run(
            "download",
            [*args, *extra],
            writable=(str(wheels), str(network.pip_cache)),
            readable=network.readable,
            network=True,
            extra_env=network.env,
        )
        if rc != 0:
            notes.append(f"downloading {what} requirements failed: {_last_line(output)}")
    return notes


def _install(
    builder: Builder,
    wanted: Plan,
    repo: Repository,
    venv: Path,
    bind: tuple[Bind, ...],
    wheels: Path,
    constraints: Path,
    failed: dict[str, str],
) -> list[str]:
    """3. install, offline: the submission's code (local builds, .pth files) runs from here on.
    All at once, else one at a time; what was installed (``failed`` gets the rest)."""
    requirements = [r for r in wanted.index if r not in failed]
    local = [f"{name}={path}" for name, path in wanted.local]
    python = builder.python
    install = [python, _SANDBOX_STEP, "install", str(venv), "--wheels", str(wheels), "--constraints", str(constraints)]
    done: list[str] = []
    if not (requirements or local):
        return done
    readable = (str(wheels), str(constraints), os.path.realpath(repo.root))
    every = [*install, *[a for x in local for a in ("--local", x)]]
    every += [a for r in requirements for a in ("--requirement", r)]
    rc, output = builder.run("install", every, writable=bind, readable=readable)
    if rc == 0:
        return requirements + [name for name, _ in wanted.local]
    for one in [["--local", x] for x in local] + [["--requirement", r] for r in requirements]:
        rc, output = builder.run("install", [*install, *one], writable=bind, readable=readable)
        what = one[1].partition("=")[0] if one[0] == "--local" else one[1]
        if rc == 0:
            done.append(what)
        else:
            failed[what] = _last_line(output)
    return done


def _probe_env(builder: Builder, vpython: str, work: Path, bind: tuple[Bind, ...]) -> None:
    """4. probe: the environment's interpreter, in the sandbox; its answer is data."""
    probe_out = work / "probe"
    probe_out.mkdir()
    argv = [vpython, "-I", "-c", _PROBE, str(probe_out / "probe.json")]
    rc, output = builder.run("probe", argv, readable=bind, writable=(str(probe_out),))
    found = _read_json(probe_out / "probe.json", probe_out)
    if rc != 0 or not isinstance(found, dict) or not isinstance(found.get("missing"), list):
        raise EnvError(f"the environment's interpreter does not start: {_last_line(output)}")
    missing = [str(m)[:50] for m in found["missing"]]
    if missing:
        raise EnvError(f"the environment lacks {', '.join(missing)} after its dependencies were installed")


def _resolved(report: Any) -> list[str]:
    """name==version of every distribution pip's dry run would install (names and versions validated)."""
    from lmspec.tools.grade.repository import valid_version

    items = report.get("install") if isinstance(report, dict) else None
    out = []
    for item in items if isinstance(items, list) else []:
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = valid_name(meta.get("name")) if isinstance(meta, dict) else None
        version = valid_version(meta.get("version")) if isinstance(meta, dict) else None
        if name and version and _normalize(name) not in NEVER_INSTALL:
            out.append(f"{name}=={version}")
    return out


def _size(folder: Path) -> int:
    """Bytes under ``folder`` (links not followed)."""
    total = 0
    for base, _dirs, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(base, name)).st_size
        if total > MAX_ENV_BYTES:
            break
    return total
