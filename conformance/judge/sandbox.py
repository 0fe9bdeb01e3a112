"""How the judge starts the worker: the command line (bubblewrap or none),
the environment (an allow-list, never the judge's own variables) and the
resource limits.

Under bubblewrap the worker sees: a read-only view of the system (/usr, the
libraries, a few files of /etc), of the Python installation that runs it and
of the submission's folder (and of its environment's folder, with --env
auto); the worker's own code at /opt/lmspec; the oracle files its
profile's binder reads, at /opt/lmspec-data; a private writable /tmp
(tmpfs, size-limited) as its scratch and home; its own /proc and a
read-only /dev whose /dev/shm is a size-limited tmpfs of its own; no
network (a new network namespace with only an unconnected loopback); its
own PID namespace (it cannot see or signal the judge, and everything it
starts dies with it: --die-with-parent and the namespace's init). The
judge's output folder, the suite, the reference and every other file of
lmspec are not there.

Nothing the submission controls decides what is bound: the folders of the
interpreter are asked of the interpreter the grader chose (``-I``, from no
folder of the grader's), never of a submission's environment (its
``.pth`` files would run on the host); the adapter file must lie inside
the submission's folder. What the submission can keep in memory is its
address-space limit plus its two writable tmpfs, /tmp (``tmp_mb``) and
/dev/shm (``shm_mb``): every writable space is bounded.
"""

import enum
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lmspec import ROOT

WORKER_SOURCE = Path(__file__).resolve().parent / "worker"
SANDBOX_WORKER_DIR = "/opt/lmspec"
SANDBOX_BASE_DIR = "/opt/lmspec-base"  # lmspec's reference, only for its own meta-test adapters
SANDBOX_DATA_DIR = "/opt/lmspec-data"  # oracle files a profile's binder reads
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "passwd",
    "group",
    "localtime",
    "alternatives",
)
#: Variables the worker may inherit from the judge (values re-checked); nothing else.
_PASS_THROUGH = ("CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG")


class Sandbox(enum.StrEnum):
    AUTO = "auto"
    BWRAP = "bwrap"
    NONE = "none"


@dataclass(frozen=True)
class WorkerSpec:
    """Everything needed to start one worker."""

    adapter: str  # a file path (absolute) or an import name
    root: Path | None  # the submission's folder (read-only in the sandbox)
    sandbox: Sandbox = Sandbox.BWRAP
    python: str = sys.executable
    memory_gb: float | None = 4.0
    threads: int = 1
    cpu_seconds: int = 3600
    tmp_mb: int = 2048
    shm_mb: int = 256
    cuda: bool = False
    allow_reference: bool = False  # lmspec's own meta-test adapters build on the reference
    binder: str | None = None  # the profile's binder (conformance/judge/worker/binders)
    hidden: tuple[str, ...] = ()  # folders inside root covered by an empty read-only tmpfs (the grader's output)
    data: tuple[tuple[str, str], ...] = ()  # (name, host path) of oracle files the binder reads
    venv: str | None = None  # the submission's environment (--env auto): bound read-only, never run here
    base_python: str | None = None  # the interpreter that environment was made from (its folders are bound)

    def worker_args(self, *, data_dir: str | None = None) -> list[str]:
        """The worker's command line for this spec (the last hop of the target):
        ``data_dir`` is where the data files are, as the worker sees them."""
        args = ["--adapter", self.adapter]
        if self.root is not None:
            args += ["--root", str(self.root)]
        if self.binder:
            args += ["--binder", self.binder]
        for name, path in self.data:
            args += ["--data", f"{name}={f'{data_dir}/{name}' if data_dir else path}"]
        return args


def bwrap_problem() -> str | None:
    """None when bubblewrap can start a sandbox here, else why not."""
    return _bwrap_probe()


@functools.cache
def _bwrap_probe() -> str | None:
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    cmd = [exe, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run: {exc}"
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        return f"bwrap cannot create namespaces here: {why[-1] if why else f'exit status {proc.returncode}'}"
    return None


def resolve(choice: Sandbox | str) -> tuple[Sandbox, str | None]:
    """The sandbox to use for ``choice`` and, when it is none, the warning."""
    choice = Sandbox(choice)
    if choice is Sandbox.NONE:
        return (
            Sandbox.NONE,
            "the submission runs WITHOUT a sandbox (--sandbox none): it can read and change this machine",
        )
    problem = bwrap_problem()
    if problem is None:
        return Sandbox.BWRAP, None
    if choice is Sandbox.BWRAP or os.environ.get("LMSPEC_REQUIRE_BWRAP"):
        raise RuntimeError(f"--sandbox {choice}: {problem} (LMSPEC_REQUIRE_BWRAP or --sandbox bwrap)")
    return Sandbox.NONE, f"NOT SANDBOXED: {problem}; the submission ran with this user's rights (--sandbox auto)"


def environment(spec: WorkerSpec, home: str) -> dict[str, str]:
    """The worker's whole environment."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": str(spec.threads),
        "MKL_NUM_THREADS": str(spec.threads),
        "OPENBLAS_NUM_THREADS": str(spec.threads),
        "MPLBACKEND": "Agg",
    }
    for name in _PASS_THROUGH:
        value = os.environ.get(name)
        if value is not None and all(c.isalnum() or c in ",:-_" for c in value):
            env[name] = value
    return env


@functools.cache
def _interpreter_dirs(python: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(folders to bind, folders on sys.path) of the interpreter: its
    prefixes and every folder on its sys.path (a per-submission venv's .pth
    adds the grader's site-packages), never lmspec's own sources (an editable
    install's path into the checkout): those stay out of the sandbox.

    Asked of the interpreter itself with ``-I`` from the filesystem root, so
    neither the grader's PYTHONPATH nor its working folder (the judge's
    output folder) is on it. ``python`` is an interpreter the grader chose,
    never a submission's environment (WorkerSpec.venv)."""
    code = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.path]))"
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd="/")
    prefix, base, exec_prefix, paths = json.loads(out.stdout)
    own = [str(ROOT / d) for d in ("conformance", "reference", "tools", "tests", "snapshots", "docs", "lmspec")]
    dirs = set()
    for entry in (prefix, base, exec_prefix, *paths):
        real = os.path.realpath(entry) if entry and os.path.isabs(entry) else ""
        if not real or not os.path.isdir(real) or real in (str(ROOT), "/"):
            continue
        if any(real == o or real.startswith(o + os.sep) for o in own):
            continue
        dirs.add(real)
    # the interpreter binary may be a symlink into another prefix (venvs)
    exe = os.path.realpath(python)
    dirs.add(os.path.dirname(os.path.dirname(exe)))
    keep = sorted(d for d in dirs if not d.startswith("/usr/") and d != "/usr")
    bind = tuple(d for d in keep if not any(d != o and d.startswith(o + os.sep) for o in keep))
    return bind, tuple(sorted(dirs))


def adapter_outside_root(spec: WorkerSpec) -> str | None:
    """Why ``spec``'s adapter file cannot be bound (None when it can): it must
    lie, links resolved, inside the submission's folder."""
    if not (spec.adapter.endswith((".py", ".ipynb")) or os.path.isabs(spec.adapter)):
        return None  # an import name
    if spec.root is None:
        return f"the adapter file {spec.adapter} has no submission folder"
    real = Path(os.path.realpath(spec.adapter))
    if not real.is_relative_to(os.path.realpath(spec.root)):
        return f"the adapter file {spec.adapter} lies outside the submission's folder {spec.root}"
    return None


def _lmspec_dirs_inside(path_dirs: tuple[str, ...]) -> list[str]:
    """lmspec's own installed packages in a folder on the interpreter's path
    (a non-editable install in the same site-packages), to be hidden under an
    empty tmpfs."""
    hidden = []
    for base in path_dirs:
        for candidate in (Path(base) / "lmspec", Path(base) / "conformance", Path(base) / "reference"):
            own = (candidate / "conformance" / "plugin.py", candidate / "plugin.py", candidate / "adapter" / "nn.py")
            if candidate.is_dir() and any(marker.is_file() for marker in own):
                hidden.append(str(candidate))
    return hidden


def bwrap_command(spec: WorkerSpec, worker_args: list[str], info_fd: int) -> list[str]:
    problem = adapter_outside_root(spec)
    if problem:
        raise ValueError(f"not bound into the sandbox: {problem}")
    cmd = [
        shutil.which("bwrap") or "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--hostname",
        "lmspec-worker",
        "--clearenv",
        "--proc",
        "/proc",
        *dev_args(spec.shm_mb),
        "--size",
        str(spec.tmp_mb << 20),
        "--tmpfs",
        "/tmp",
        "--info-fd",
        str(info_fd),
    ]
    cmd += system_binds()
    bound, path_dirs = _interpreter_dirs(spec.base_python or spec.python)
    for d in bound:
        cmd += ["--ro-bind", d, d]
    for d in _lmspec_dirs_inside(path_dirs):
        cmd += ["--tmpfs", d, "--remount-ro", d]
    if spec.venv is not None:
        cmd += ["--ro-bind", spec.venv, spec.venv]
    cmd += ["--ro-bind", str(WORKER_SOURCE), f"{SANDBOX_WORKER_DIR}/lmspec_worker"]
    if spec.allow_reference:
        # importable as lmspec.reference: lmspec is then a namespace package holding only it
        cmd += ["--ro-bind", str(ROOT / "reference"), f"{SANDBOX_BASE_DIR}/lmspec/reference"]
    for name, path in spec.data:
        cmd += ["--ro-bind", path, f"{SANDBOX_DATA_DIR}/{name}"]
    if spec.root is not None:
        cmd += ["--ro-bind", str(spec.root), str(spec.root)]
        for folder in spec.hidden:  # an --out inside the submission: its logs are the judge's, never the worker's
            if Path(folder).is_dir() and Path(folder).is_relative_to(spec.root):
                cmd += ["--tmpfs", folder, "--remount-ro", folder]
    if spec.cuda:
        for dev in sorted(Path("/dev").glob("nvidia*")):
            cmd += ["--dev-bind", str(dev), str(dev)]
    for key, value in environment(spec, "/tmp").items():
        cmd += ["--setenv", key, value]
    cmd += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/tmp", "--"]
    return cmd + _python_command(spec, SANDBOX_WORKER_DIR, "/tmp", worker_args, SANDBOX_BASE_DIR)


def dev_args(shm_mb: int) -> list[str]:
    """A private /dev whose /dev/shm is a tmpfs of ``shm_mb`` MiB (``--dev``
    alone makes /dev/shm a folder of a tmpfs as large as half the host's
    memory); /dev itself is made read-only at the end of the command."""
    return ["--dev", "/dev", "--size", str(shm_mb << 20), "--tmpfs", "/dev/shm"]


def system_binds() -> list[str]:
    """The system, read-only: /usr and its companions, and a few files of /etc."""
    cmd: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            cmd += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    for name in _ETC_FILES:
        path = f"/etc/{name}"
        if os.path.exists(path):
            cmd += ["--ro-bind", path, path]
    return cmd


def _python_command(spec: WorkerSpec, worker_dir: str, scratch: str, worker_args: list[str], base: str) -> list[str]:
    boot = f"import sys; sys.path.insert(0, {worker_dir!r}); from lmspec_worker.__main__ import main; sys.exit(main())"
    args = [spec.python, "-I", "-c", boot, *worker_args, "--scratch", scratch]
    if spec.allow_reference:
        args += ["--path", base]
    return args


def unsandboxed_command(spec: WorkerSpec, worker_args: list[str], scratch: Path) -> list[str]:
    """--sandbox none: the same worker in a private scratch folder, with a
    copy of its code (so nothing else of lmspec is on its path)."""
    code = scratch / "lmspec"
    shutil.copytree(WORKER_SOURCE, code / "lmspec_worker", ignore=shutil.ignore_patterns("__pycache__"))
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    return _python_command(spec, str(code), str(home), worker_args, str(ROOT))


def make_scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="lmspec-worker-"))


def rlimits(spec: WorkerSpec) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) applied to the worker (and bwrap) before exec;
    never above what the judge itself is allowed."""
    import resource

    wanted = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 512 << 20)]
    if spec.memory_gb and not spec.cuda:  # CUDA reserves huge virtual ranges
        wanted.append((resource.RLIMIT_AS, int(spec.memory_gb * (1 << 30))))
    wanted.append((resource.RLIMIT_CPU, spec.cpu_seconds))
    out = []
    for res, value in wanted:
        _, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        out.append((res, value, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return out


class Paths:
    """Worker-reported paths as this judge and the submission's author see them."""

    def __init__(self, root: Path | None):
        self.root = root

    @staticmethod
    def host(path: str) -> str:
        """A path the worker reported, as this judge sees it (the sandbox shows
        lmspec's reference, for its own meta-test adapters, elsewhere)."""
        if path.startswith(SANDBOX_BASE_DIR + "/lmspec/"):
            return str(ROOT) + path[len(SANDBOX_BASE_DIR) + len("/lmspec") :]
        return path

    def display(self, where: str) -> str:
        """A "path:line" relative to the submission's folder (or to lmspec for its reference)."""
        path = self.host(where)
        for base in (self.root, ROOT):
            if base is not None and path.startswith(str(base) + "/"):
                return path[len(str(base)) + 1 :]
        return path
