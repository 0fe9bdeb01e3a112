"""Meta-tests of the grader's own side of the trust model: hostile
repositories (tests/hostile_repos) graded end to end by ``python -m
tools.grade``, attacking what the grader does OUTSIDE the worker's sandbox
with data the submission controls: building its environment (``--env
auto``: a build backend, ``setup.py``, a wheel's ``.pth`` file), names and
versions that are paths, links out of the submission, parse bombs, a build
that never ends.

Each case copies its repository into a folder of its own, with the test's
values filled in (@@ROOT@@, @@MARKERS@@, @@PORT@@, @@NAME@@, and the hostile
code of _evil.py at ``# @@EVIL@@``), plants a secret in the grader's
environment, points the grader's HOME and TMPDIR into the case folder, and
grades. Besides its own verdict, every case checks: results.json is present
and the exit status is 0 or 1; no file was created or changed in the case
folder outside the output and environment-cache folders (the repository,
the markers folder, HOME and TMPDIR included), nor in the host's /tmp under
a marker's name; no process of the submission is left; the planted secret
is in no output, cache file or console line; no connection reached the
test's loopback listener. Gradings run two at a time in the background.

The cases need bubblewrap; without it they skip, except in CI
(LMSPEC_REQUIRE_BWRAP=1), where that is a failure. The environment cases
need the package index (setuptools, for the local dependencies' builds).
"""

import base64
import fcntl
import json
import os
import shutil
import threading
import time
import zipfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from grader_run import run_grader
from test_hostile import SECRET, _Listener, _processes_mentioning

from lmspec.conformance.judge.sandbox import bwrap_problem

REPO = Path(__file__).resolve().parent.parent
REPOS = REPO / "tests" / "hostile_repos"
NEEDS_BWRAP = pytest.mark.skipif(
    bwrap_problem() is not None and not os.environ.get("LMSPEC_REQUIRE_BWRAP"),
    reason=f"the sandbox cases need bubblewrap: {bwrap_problem()}",
)

# case -> (repository template, the folder graded (relative to the case's copy), grader arguments)
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # longest first: they run two at a time
    "env_hooks": ("env_hooks", ".", ("--env", "auto")),
    "env_timeout": ("env_timeout", ".", ("--env", "auto", "--timeout", "40")),
    "env_names": ("env_names", ".", ("--env", "auto")),
    "parse_bombs_none": ("parse_bombs", ".", ("--env", "none")),
    "parse_bombs_auto": ("parse_bombs", ".", ("--env", "auto")),
    "adapter_link": ("adapter_link", "submission", ()),
}


@dataclass
class Graded:
    name: str
    returncode: int
    data: dict
    case: Path
    output: str
    created: list[str] = field(default_factory=list)
    host_markers: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    secret_in: list[str] = field(default_factory=list)
    connections: int = 0

    @property
    def cache(self) -> Path:
        return self.case / "cache"

    def item(self, item_id: str) -> dict:
        found = [i for i in self.data["items"] if i["id"] == item_id]
        assert found, f"{item_id} not in the report: {[i['id'] for i in self.data['items']]}\n{self.output}"
        return found[0]


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"@@{key}@@", value)
    return text


def _hook_wheel(path: Path, code: str) -> None:
    """A wheel that ships a .pth file: ``code`` runs at every start of the interpreter it is installed in."""
    encoded = base64.b64encode(code.encode()).decode()
    info = "hook_pth-0.1.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr("hook_pth.pth", f"import base64; exec(base64.b64decode('{encoded}'))\n")
        whl.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: hook-pth\nVersion: 0.1\n")
        wheel = "Wheel-Version: 1.0\nGenerator: hostile\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        whl.writestr(f"{info}/WHEEL", wheel)
        whl.writestr(f"{info}/RECORD", f"hook_pth.pth,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")


def _prepare(name: str, case: Path, port: int) -> Path:
    """The case's repository, filled in; the folder to grade."""
    template, graded, _ = CASES[name]
    repo = case / "repo"
    shutil.copytree(REPOS / template, repo, symlinks=True)
    for folder in ("markers", "home", "tmp"):
        (case / folder).mkdir()
    values = {"ROOT": str(repo), "MARKERS": str(case / "markers"), "PORT": str(port), "NAME": name}
    evil = _fill((REPOS / "_evil.py").read_text(), values)
    values["EVIL"] = evil
    for path in repo.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.suffix in (".py", ".toml"):
            path.write_text(_fill(path.read_text().replace("# @@EVIL@@", "@@EVIL@@"), values))
    if template == "env_hooks":
        (repo / "dist").mkdir()
        # once per process tree: the survivor it starts is an interpreter of this environment too
        once = 'import os\nif os.environ.get("LMSPEC_HOOK_PTH") != "ran":\n    os.environ["LMSPEC_HOOK_PTH"] = "ran"\n'
        code = evil + "\n" + once + '    evil("pth")\n'
        _hook_wheel(repo / "dist" / "hook_pth-0.1-py3-none-any.whl", code)
    if template == "adapter_link":
        (repo / "submission" / "tests").mkdir(parents=True, exist_ok=True)  # git keeps no empty folder
        (repo / "submission" / "tests" / "adapters.py").symlink_to(repo / "solution" / "tests" / "adapters.py")
    if template == "parse_bombs":
        depth = 5000
        (repo / "pyproject.toml").write_text(
            f'[project]\nname = "parse-bombs"\nversion = "0.1.0"\ndependencies = {"[" * depth}{"]" * depth}\n'
        )
        (repo / "requirements.txt").write_text("heapdict\n" * ((3 << 20) // 9))
        (repo / "CHANGELOG.md").write_text("#" * (6 << 20))
    return repo / graded


def _snapshot(case: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file (and link) of the case folder but the output
    and cache folders; folders by name only (temporary files come and go in them)."""
    found = {}
    for base, dirs, names in os.walk(case):
        dirs[:] = [d for d in dirs if Path(base, d) not in (case / "out", case / "cache")]
        for entry in [*names, *dirs]:
            path = Path(base, entry)
            info = path.lstat()
            plain_folder = path.is_dir() and not path.is_symlink()
            found[str(path.relative_to(case))] = (0, 0) if plain_folder else (info.st_size, info.st_mtime_ns)
    return found


def _host_markers(name: str) -> dict[str, int]:
    """Markers of this case in the host's /tmp and home: {path: mtime}."""
    home = Path.home()
    places = [Path("/tmp"), home, home / ".cache"]
    return {str(p): p.lstat().st_mtime_ns for place in places for p in place.glob(f"lmspec-hostile-marker-{name}-*")}


def _grade_case(name: str, shared: Path) -> Graded:
    case = shared / name
    case.mkdir(parents=True, exist_ok=True)
    done = case / "done.json"
    with open(shared / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            for stale in case.iterdir():
                shutil.rmtree(stale) if stale.is_dir() and not stale.is_symlink() else stale.unlink()
            listener = _Listener()
            graded = _prepare(name, case, listener.port)
            before = _snapshot(case)
            markers_before = _host_markers(name)  # another run's (an unsandboxed grader's) are not this one's
            try:
                rc, output, _ = run_grader(
                    case / "out",
                    str(graded),
                    "--spec",
                    "2.silu",
                    "--jobs",
                    "1",
                    "--env-cache",
                    str(case / "cache"),
                    *CASES[name][2],
                    env={
                        "GITHUB_TOKEN": SECRET,
                        "LMSPEC_TEST_TOKEN": SECRET,
                        "HOME": str(case / "home"),
                        "TMPDIR": str(case / "tmp"),
                        "XDG_CACHE_HOME": str(case / "home" / ".cache"),
                    },
                )
            finally:
                time.sleep(1.0)
                connections = listener.close()
            after = _snapshot(case)
            created = sorted(
                f"{p} {'created' if p not in before else 'changed'}"
                for p in after
                if before.get(p) != after[p] and not p.startswith("tmp/pytest-of-")
            )
            created += sorted(f"{p} removed" for p in before if p not in after)
            leftovers = _processes_mentioning(f"lmspec-survivor-{name}") + _processes_mentioning(str(case / "repo"))
            secret_in = [
                str(p.relative_to(case))
                for folder in (case / "out", case / "cache")
                for p in folder.rglob("*")
                if p.is_file() and not p.is_symlink() and SECRET in p.read_text(errors="replace")
            ]
            if SECRET in output:
                secret_in.append("the grader's console output")
            meta = {
                "rc": rc,
                "output": output,
                "created": created,
                "host_markers": sorted(p for p, t in _host_markers(name).items() if markers_before.get(p) != t),
                "leftovers": leftovers,
                "secret_in": secret_in,
                "connections": connections,
            }
            done.write_text(json.dumps(meta))
    meta = json.loads(done.read_text())
    results = case / "out" / "results.json"
    data = json.loads(results.read_text()) if results.is_file() else {}
    return Graded(
        name,
        meta["rc"],
        data,
        case,
        meta["output"],
        meta["created"],
        meta["host_markers"],
        meta["leftovers"],
        meta["secret_in"],
        meta["connections"],
    )


class _Prefetch:
    def __init__(self, shared: Path):
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hostile-host")
        self.futures: dict[str, Future] = {n: self.pool.submit(_grade_case, n, shared) for n in CASES}

    def get(self, name: str) -> Graded:
        return self.futures[name].result()


_PREFETCH: dict[str, _Prefetch] = {}
_LOCK = threading.Lock()


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = base.parent / "lmspec-hostile-host-cases"
        shared.mkdir(exist_ok=True)
        return lambda name: _grade_case(name, shared)
    shared = base / "lmspec-hostile-host-cases"
    shared.mkdir(exist_ok=True)
    with _LOCK:
        prefetch = _PREFETCH.setdefault(str(shared), _Prefetch(shared))
    return prefetch.get


def _check_common(g: Graded) -> None:
    """What every hostile grading must satisfy besides its own verdict."""
    assert g.returncode in (0, 1), g.output
    assert g.data, f"no results.json: {g.output}"
    assert g.data["passed"] == (g.returncode == 0), g.output
    assert not g.created, f"files outside the output and cache folders: {g.created}"
    assert not g.host_markers, f"markers on the host: {g.host_markers}"
    assert not g.leftovers, f"processes of the submission outlived the grading: {g.leftovers}"
    assert not g.secret_in, f"the planted secret reached {g.secret_in}"
    assert g.connections == 0, f"{g.connections} connection(s) reached the loopback listener"


def _venv(g: Graded) -> Path:
    environment = g.data["implementation"]["environment"]
    assert environment and environment.get("venv"), g.data["implementation"]
    venv = Path(environment["venv"])
    assert venv.parent == g.cache, venv
    return venv


# --- building the submission's environment ------------------------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
def test_environment_build_hooks_run_only_in_the_build_sandbox(graded) -> None:
    """A build backend, a setup.py and a wheel's .pth file run (evidence in
    the environment's own folder, and the adapter's answer depends on the
    .pth file having run in the worker), but only inside sandboxes: no marker
    on the host, no survivor, no secret, no connection; the direct URL to
    the listener is not installed."""
    g = graded("env_hooks")
    _check_common(g)
    assert g.returncode == 0 and g.item("2.silu")["status"] == "pass", g.output
    environment = g.data["implementation"]["environment"]
    assert environment["sandbox"] == "bwrap", environment
    assert {"hook-backend", "hook-setup", "hook-pth"} <= set(environment["installed"]), environment
    assert any(n.startswith("phone-home: a direct reference") for n in environment["notes"]), environment
    venv = _venv(g)
    for where in ("backend", "setup"):
        evidence = venv / f"hostile-evidence-{where}"
        assert evidence.is_file(), f"the {where} hook did not run where it may write: {sorted(os.listdir(venv))}"
        assert "lmspec-planted" not in evidence.read_text()
    assert sorted(p.name for p in g.cache.iterdir()) == sorted([venv.name, f"{venv.name}.json"])


@pytest.mark.slow
@NEEDS_BWRAP
def test_environment_build_is_stopped_at_the_time_limit(graded) -> None:
    """A build backend that never ends: the build is stopped within --timeout,
    nothing it started is left, and results.json says why (exit 1)."""
    g = graded("env_timeout")
    _check_common(g)
    assert g.returncode == 1 and g.data["score"] == 0, g.output
    assert "environment could not be built" in g.data["error"], g.data["error"]
    assert "took over" in g.data["error"] or "ran out of time" in g.data["error"], g.data["error"]
    assert {i["status"] for i in g.data["items"]} == {"error"}
    assert [p.name for p in g.cache.iterdir() if not p.name.startswith(".")] == [], "an unfinished environment was kept"


@pytest.mark.slow
@NEEDS_BWRAP
def test_names_and_versions_that_are_paths_are_not_used(graded) -> None:
    """A [project] name and version that are paths: not used (named in
    the report), nothing written outside the cache; the environment is
    built and used (the adapter imports its local dependency)."""
    g = graded("env_names")
    _check_common(g)
    assert g.returncode == 0 and g.item("2.silu")["status"] == "pass", g.output
    problems = g.data["implementation"]["repository"]["problems"]
    assert any("the name" in p and "not a PEP 508 name" in p for p in problems), problems
    assert any("the version" in p and "not a PEP 440 version" in p for p in problems), problems
    assert g.data["implementation"]["repository"]["name"] is None
    assert not os.listdir(g.case / "markers")
    _venv(g)


# --- links out of the submission -----------------------------------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
def test_adapters_file_linked_out_of_the_submission_is_its_error(graded) -> None:
    """tests/adapters.py is a link to a correct file outside the submission:
    not graded as that file's repository but the submission's error, naming
    the link; every item an error, score 0, exit 1."""
    g = graded("adapter_link")
    _check_common(g)
    assert g.returncode == 1 and g.data["score"] == 0 and g.data["max_score"] > 0, g.output
    error = g.data["error"] or ""
    assert "tests/adapters.py is a symbolic link" in error and "solution" in error, error
    assert {i["status"] for i in g.data["items"]} == {"error"}
    assert g.data["implementation"]["name"] == "submission"


# --- parsing submission data ---------------------------------------------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
def test_parse_bombs_are_the_submissions_problem(graded) -> None:
    """A pyproject nested 5000 deep, a 3 MB requirements.txt, a 6 MB
    CHANGELOG line: with --env none a warning (graded, correct adapter
    passes); with --env auto the submission's error (its dependencies are
    unknown), exit 1, never the grader's crash."""
    g = graded("parse_bombs_none")
    _check_common(g)
    assert g.returncode == 0 and g.item("2.silu")["status"] == "pass", g.output
    assert any("nested too deeply" in w for w in g.data["warnings"]), g.data["warnings"]
    assert any("requirements.txt" in w and "limit" in w for w in g.data["warnings"]), g.data["warnings"]
    g = graded("parse_bombs_auto")
    _check_common(g)
    assert g.returncode == 1 and "nested too deeply" in (g.data["error"] or ""), g.output
    assert {i["status"] for i in g.data["items"]} == {"error"}
