"""Unit tests of the grader's host side (what it does outside the sandbox
with submission-controlled data): the wire format's per-frame budget, links
out of a submission, bounded parses, validated names and versions, paths the
grader writes, the sandbox's binds, and the choice of interpreter. The end
to end gradings are in tests/test_hostile_host.py and tests/test_hostile.py."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import msgpack
import numpy as np
import pytest
import torch

from lmspec.conformance.fixtures import FixtureRefused, FixtureSet, Source
from lmspec.conformance.judge import sandbox
from lmspec.conformance.judge.worker import loader, protocol
from lmspec.conformance.target import resolve
from lmspec.tools.grade import envs, pythons
from lmspec.tools.grade.files import inside
from lmspec.tools.grade.repository import inspect

REPO = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


# --- the wire format: a frame's budget is checked before anything is built --------------------------
def _refused(value: object) -> str:
    with pytest.raises(protocol.ProtocolError) as info:
        protocol.decode(protocol.encode(value))
    return str(info.value)


def test_frame_of_many_empty_arrays_is_refused() -> None:
    message = _refused([np.empty(0, dtype=np.float32)] * (protocol.MAX_ARRAYS + 1))
    assert "tensors and arrays exceeds the limit" in message


def test_frame_of_many_empty_tensors_is_refused() -> None:
    assert "tensors and arrays" in _refused([torch.empty(0)] * (protocol.MAX_ARRAYS + 1))


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        (["float32", [2], "cpu", 0, b"\0" * 7], "is not float32 [2]"),  # bytes short of the shape
        (["float32", [1 << 61, 4], "cpu", 0, b""], "is not float32"),  # a shape the bytes do not cover
        (["object", [1], "cpu", 0, b"\0" * 8], "dtype 'object' is not accepted"),
        (["float32", [-1], "cpu", 0, b""], "bad tensor shape"),
        (["float32", [1.5], "cpu", 0, b""], "bad tensor shape"),
        (["float32", [1], "cpu", 0, "abcd"], "device, flags or data"),
        (["float32", [1], "cpu", 0], "must be [dtype, shape, device, flags, data]"),
        ({"dtype": "float32"}, "bad tensor"),
    ],
)
def test_malformed_tensors_are_refused(fields: object, why: str) -> None:
    frame = msgpack.packb(msgpack.ExtType(protocol.EXT_TENSOR, msgpack.packb(fields)))
    with pytest.raises(protocol.ProtocolError, match=re.escape(why)):
        protocol.decode(frame)


def test_tensors_travel_exactly() -> None:
    """Every accepted dtype, with its shape, views and flags; bool bytes other than 0 and 1 are True."""
    sent = [torch.arange(12, dtype=torch.float64).reshape(3, 4).t()[1:], torch.tensor(2.5, dtype=torch.bfloat16)]
    sent += [torch.arange(6).to(d).reshape(2, 3) for d in protocol._DTYPES] + [torch.zeros(0, 3)]
    sent += [torch.nn.Parameter(torch.ones(2)), torch.ones(2, requires_grad=True)]
    back = protocol.decode(protocol.encode(sent))
    for a, b in zip(sent, back, strict=True):
        assert (type(b), b.dtype, b.shape, b.requires_grad) == (type(a), a.dtype, a.shape, a.requires_grad)
        assert torch.equal(a.detach(), b.detach())
    bools = msgpack.packb(msgpack.ExtType(protocol.EXT_TENSOR, msgpack.packb(["bool", [3], "cpu", 0, b"\0\2\1"])))
    assert protocol.decode(bools).tolist() == [False, True, True]


def test_frame_of_many_tuples_is_refused() -> None:
    assert "non-plain values" in _refused([(1,)] * (protocol.MAX_EXT + 1))


def test_frame_of_many_empty_lists_is_refused() -> None:
    assert "list items and map entries" in _refused([[[]] * 1000] * (protocol.MAX_ITEMS // 1000 + 1))


def test_announced_list_longer_than_the_budget_is_refused_before_allocation() -> None:
    # an array header announcing 2**31 items, with nothing after it (msgpack: 0xdd + uint32)
    with pytest.raises(protocol.ProtocolError, match="exceeds max_array_len"):
        protocol.decode(b"\xdd\x80\x00\x00\x00")


def test_largest_real_frames_are_accepted() -> None:
    """A GPT-2-sized vocabulary (50,257 bytes values) and its merges (50,000 tuples of bytes)."""
    vocab = {i: bytes([i % 256]) * (1 + i % 7) for i in range(50_257)}
    merges = [(b"a" * (1 + i % 5), b"b" * (1 + i % 3)) for i in range(50_000)]
    params = [torch.randn(8, 8) for _ in range(200)]
    vocab2, merges2, params2 = protocol.decode(protocol.encode((vocab, merges, params)))
    assert vocab2 == vocab and merges2 == merges and all(torch.equal(a, b) for a, b in zip(params, params2))


def test_refusing_a_flood_frame_keeps_the_judge_small() -> None:
    """Decoding a 48 MB frame of 750,000 empty arrays (3.6 GiB before the
    budget) grows the process by less than 200 MB."""
    code = textwrap.dedent(
        """
        import resource, numpy as np
        from lmspec.conformance.judge.worker import protocol
        data = protocol.encode([np.empty(0, dtype=np.float32)] * 750_000)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            protocol.decode(data)
        except protocol.ProtocolError:
            pass
        print(len(data), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    out = proc.stdout.split()
    size, grown_kb = int(out[0]), int(out[1])
    assert size > 40e6 and grown_kb < 200 * 1024, (size, grown_kb)


# --- links out of the submission ------------------------------------------------------------------------
def _repo(path: Path, adapters: bool = True) -> Path:
    (path / "tests").mkdir(parents=True)
    (path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.1"\n')
    if adapters:
        (path / "tests" / "adapters.py").write_text("def run_silu(in_features):\n    return in_features\n")
    return path


@pytest.mark.parametrize("given", ["folder", "file"])
def test_adapters_file_linked_out_is_a_problem_naming_the_link(tmp_path: Path, given: str) -> None:
    other = _repo(tmp_path / "other")
    mine = _repo(tmp_path / "mine", adapters=False)
    (mine / "tests" / "adapters.py").symlink_to(other / "tests" / "adapters.py")
    target = resolve(str(mine if given == "folder" else mine / "tests" / "adapters.py"))
    assert target.problem and "tests/adapters.py is a symbolic link" in target.problem, target
    assert target.root == mine and "other" not in str(target.root)


def test_folder_linked_out_is_a_problem(tmp_path: Path) -> None:
    other = _repo(tmp_path / "other")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "pyproject.toml").write_text("")
    (mine / "tests").symlink_to(other / "tests")
    target = resolve(str(mine))
    assert target.problem and target.problem.startswith("tests is a symbolic link"), target


def test_links_inside_the_submission_are_followed(tmp_path: Path) -> None:
    mine = _repo(tmp_path / "mine", adapters=False)
    (mine / "src.py").write_text("def run_silu(in_features):\n    return in_features\n")
    (mine / "tests" / "adapters.py").symlink_to("../src.py")
    target = resolve(str(mine))
    assert target.problem is None and target.adapter == str(mine / "src.py")


def test_the_users_own_link_to_the_folder_is_followed(tmp_path: Path) -> None:
    mine = _repo(tmp_path / "mine")
    (tmp_path / "alias").symlink_to(mine)
    target = resolve(str(tmp_path / "alias"))
    assert target.problem is None and target.root == mine


def test_adapter_outside_the_root_is_never_bound(tmp_path: Path) -> None:
    mine = _repo(tmp_path / "mine")
    spec = sandbox.WorkerSpec(adapter=str(tmp_path / "elsewhere.py"), root=mine)
    with pytest.raises(ValueError, match="outside the submission's folder"):
        sandbox.bwrap_command(spec, [], 3)


@pytest.mark.skipif(not (SHARED_FIXTURES / "corpus.en").is_file(), reason="needs ../shared/fixtures")
def test_oracle_file_linked_out_of_the_graded_repository_is_refused(tmp_path: Path) -> None:
    """A link to the official file (right content) is still not followed; a
    FIFO (a read that never ends) is not read; a real copy is taken."""
    repo = _repo(tmp_path / "repo")
    (repo / "tests" / "fixtures").mkdir()
    (repo / "tests" / "fixtures" / "corpus.en").symlink_to(SHARED_FIXTURES / "corpus.en")
    os.mkfifo(repo / "tests" / "fixtures" / "german.txt")
    fixtures = FixtureSet([Source("the graded repository", repo, repository=True)])
    with pytest.raises(FixtureRefused, match="a link out of the repository"):
        fixtures.path("corpus.en")
    with pytest.raises(FixtureRefused, match="not a regular file"):
        fixtures.path("german.txt")
    (repo / "tests" / "fixtures" / "address.txt").write_bytes((SHARED_FIXTURES / "address.txt").read_bytes())
    assert fixtures.path("address.txt") == (repo / "tests" / "fixtures" / "address.txt").resolve()


# --- bounded parses, validated names ----------------------------------------------------------------------
def test_deep_pyproject_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ' + "[" * 5000 + "]" * 5000 + "\n")
    found = inspect(repo)
    assert found.pyproject_error and "nested too deeply" in found.pyproject_error
    assert found.name is None and found.dependencies == []


def test_pyproject_linked_out_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "secret.toml").write_text('[project]\nname = "secret"\n')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").symlink_to(tmp_path / "secret.toml")
    (repo / "CHANGELOG.md").symlink_to("/dev/zero")
    found = inspect(repo)
    assert found.name is None and "link out of the repository" in (found.pyproject_error or "")
    assert found.edition is None and any("CHANGELOG.md" in p for p in found.problems), found.problems


@pytest.mark.parametrize("table", ["project", "tool.poetry"])
def test_names_and_versions_that_are_paths_are_not_used(tmp_path: Path, table: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text(f'[{table}]\nname = "../../x"\nversion = "1.0/../../../tmp/y"\n')
    found = inspect(repo)
    assert found.name is None and found.version is None
    assert len(found.problems) == 2, found.problems
    assert loader.project_metadata(repo) is None


def test_worker_metadata_never_takes_a_path_for_a_version(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "pkg-x"\nversion = "/../../../../tmp/escape"\n')
    assert loader.project_metadata(repo) == ("pkg-x", "0+unknown")
    (repo / "pyproject.toml").write_text('[project]\nname = "pkg-x"\nversion = ' + "[" * 3000 + "]" * 3000 + "\n")
    assert loader.project_metadata(repo) is None


def test_direct_references_outside_the_repository_are_not_installed(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / "dep").mkdir()
    (tmp_path / "outside").mkdir()
    found = inspect(repo)
    found.dependencies = [
        f"dep @ file://{repo}/dep",
        f"out @ file://{tmp_path}/outside",
        f"up @ file://{repo}/../outside",
        "web @ https://127.0.0.1:9/web-1.0-py3-none-any.whl",
        "--index-url=http://127.0.0.1:9/simple",
    ]
    plan = envs.plan(found, "3.11.7", {})
    assert plan.local == [("dep", str((repo / "dep").resolve()))]
    assert plan.index == [] and len(plan.notes) == 4, plan.notes


def test_paths_written_by_the_grader_stay_in_their_folder(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    assert inside(cache, cache / "abc") == cache / "abc"
    for bad in (cache / ".." / "abc", cache, tmp_path / "abc"):
        with pytest.raises(RuntimeError, match="not inside"):
            inside(cache, bad)
    (cache / "link").symlink_to(tmp_path)
    with pytest.raises(RuntimeError, match="leads out"):
        inside(cache, cache / "link")


def test_pip_report_names_and_versions_are_validated() -> None:
    report = {
        "install": [
            {"metadata": {"name": "heapdict", "version": "1.0.1"}},
            {"metadata": {"name": "../evil", "version": "1.0"}},
            {"metadata": {"name": "ok", "version": "1.0 --index-url http://x"}},
            {"metadata": {"name": "torch", "version": "2.6.0"}},
            "junk",
        ]
    }
    assert envs._resolved(report) == ["heapdict==1.0.1"]


# --- the sandbox's binds ------------------------------------------------------------------------------------------
def test_dev_shm_is_bounded_and_dev_read_only(tmp_path: Path) -> None:
    spec = sandbox.WorkerSpec(adapter="lmspec.reference.adapter", root=None, shm_mb=64)
    cmd = sandbox.bwrap_command(spec, [], 3)
    shm = cmd.index("/dev/shm")
    assert cmd[shm - 3 : shm] == ["--size", str(64 << 20), "--tmpfs"]
    assert cmd.index("--dev") < shm
    remount = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--remount-ro"]
    assert "/dev" in remount


def test_interpreter_folders_leave_out_the_working_folder(tmp_path: Path) -> None:
    """The judge runs in its output folder: that folder (on the judge's own
    sys.path) is not bound into the worker's sandbox."""
    out = tmp_path / "judge-out"
    out.mkdir()
    code = (
        "import os, sys; sys.path.insert(0, os.getcwd()); from lmspec.conformance.judge import sandbox; "
        "print(sandbox.bwrap_command(sandbox.WorkerSpec(adapter='lmspec.reference.adapter', root=None), [], 3))"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    cmd = subprocess.run(
        [sys.executable, "-c", code], cwd=out, capture_output=True, text=True, env=env, check=True
    ).stdout
    assert str(out) not in cmd and str(tmp_path) not in cmd, cmd


def test_environment_interpreter_is_never_run_on_the_host(tmp_path: Path) -> None:
    """With a submission's environment, the binds come from the interpreter it
    was made from; its own interpreter (here a script that leaves a marker) is not started."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    marker = tmp_path / "ran"
    (venv / "bin" / "python").write_text(f'#!/bin/sh\ntouch {marker}\nexec {sys.executable} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    spec = sandbox.WorkerSpec(
        adapter="lmspec.reference.adapter",
        root=None,
        python=str(venv / "bin" / "python"),
        venv=str(venv),
        base_python=sys.executable,
    )
    cmd = sandbox.bwrap_command(spec, [], 3)
    assert not marker.exists()
    assert ["--ro-bind", str(venv), str(venv)] == cmd[cmd.index(str(venv)) - 1 : cmd.index(str(venv)) + 2]


# --- which Python ---------------------------------------------------------------------------------------------------
def _stub_interpreter(folder: Path, version: str, with_runtime: bool) -> Path:
    """A ``python3.X`` that reports ``version`` and, with_runtime, finds torch & co (stub packages)."""
    folder.mkdir(parents=True)
    site = folder / "site"
    for name in ("torch", "numpy", "msgpack", "safetensors") if with_runtime else ():
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text("")
    script = folder / f"python{'.'.join(version.split('.')[:2])}"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import sys, platform
            platform.python_version = lambda: {version!r}
            sys.path[:] = [{str(site)!r}] + [p for p in sys.path if "site-packages" not in p]
            exec(sys.argv[sys.argv.index("-c") + 1])
            """
        )
    )
    script.chmod(0o755)
    return script


def test_matching_interpreter_with_torch_is_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.12"\n')
    bare = _stub_interpreter(tmp_path / "a", "3.12.4", with_runtime=False)
    ready = _stub_interpreter(tmp_path / "b", "3.13.1", with_runtime=True)
    inside_repo = _stub_interpreter(repo / "bin", "3.14.0", with_runtime=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bare.parent), str(ready.parent), str(inside_repo.parent), "rel"]))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    pythons._probe.cache_clear()
    choice = pythons.choose(inspect(repo), None)
    assert choice.python == str(ready) and choice.version == "3.13.1" and not choice.mismatch, choice
    assert any("3.12.4" in entry and "no torch" in entry for entry in choice.looked), choice.looked


def test_no_matching_interpreter_grades_on_ours_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.99"\n')
    monkeypatch.setenv("PATH", str(_stub_interpreter(tmp_path / "a", "3.12.4", with_runtime=True).parent))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    pythons._probe.cache_clear()
    found = inspect(repo)
    choice = pythons.choose(found, None)
    assert choice.python == sys.executable and choice.mismatch and "rerun with --python PATH" in choice.warning
    (repo / "pkg" / "__init__.py").write_text("import os\n\ntype Shape = tuple[int, ...]\n")
    error = {"type": "SyntaxError", "file": str(repo / "pkg" / "__init__.py"), "line": 3, "message": "invalid syntax"}
    reason = pythons.explain_import_failure(error, found, choice)
    assert "pkg/__init__.py:3 uses PEP 695 syntax" in reason and "needs Python >= 3.12" in reason, reason
    assert "rerun with --python PATH" in reason


def test_results_json_for_a_link_out_is_the_submissions_error(tmp_path: Path) -> None:
    """Nothing is run: exit status 1, results.json with the error and every item an error."""
    other = _repo(tmp_path / "other")
    mine = _repo(tmp_path / "mine", adapters=False)
    (mine / "tests" / "adapters.py").symlink_to(other / "tests" / "adapters.py")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.grade", str(mine), "--out", str(tmp_path / "out"), "--quiet", "--spec", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert proc.returncode == 1, proc.stderr
    assert "symbolic link" in data["error"] and data["score"] == 0 and data["max_score"] > 0
    assert len(data["items"]) > 5 and {i["status"] for i in data["items"]} == {"error"}


def test_batch_rows_carry_names_and_errors_without_control_characters() -> None:
    """A submission's folder name and a worker's message go to the console and summary.csv plain."""
    from lmspec.tools.grade.batch import row_from_results

    row = row_from_results("alice\x1b]0;title\x07\x1b[2J", None, error="failed\x9b5A\x00 here\tnow\n")
    assert row["name"] == "alice]0;title[2J" and row["error"] == "failed5A here\tnow\n"


@pytest.mark.parametrize(
    ("tests", "status", "own_error"), [([], 2, True), ([], 4, True), ([], 5, False), ([{}], 2, False)]
)
def test_a_suite_that_did_not_run_is_the_graders_error(
    tmp_path: Path, tests: list, status: int, own_error: bool
) -> None:
    """A judge that collected nothing because the suite itself broke (collection, internal or usage
    error) is the grader's problem, named as such, never an empty grade without an error."""
    from lmspec.conformance.judge.launch import JudgeRun

    run = JudgeRun({"tests": tests}, status, 1.0, False, tmp_path / "judge.log")
    if own_error:
        assert "the suite itself did not run" in run.problem and "grader's own error" in run.problem
    else:
        assert run.problem is None
