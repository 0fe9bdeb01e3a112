"""Issue 32: the grader's own processes never import from a submission's
folder, its --out is never trusted, and no name a submission chooses crashes
the grader or reaches the terminal raw.

The processes the grader starts on the host, and where each imports from
(docs/architecture.md "Host processes"): the grader itself (``lmspec`` or
``python -m lmspec``: the working folder is dropped from sys.path), the judge
(``python -m pytest`` in a private temporary folder, PYTHONSAFEPATH=1), its
pytest-xdist workers (``python -c``, the same folder and variable), the
interpreter probes (``python -I``, working folder /), and the sandboxed
worker and environment steps (bubblewrap: they see the submission read-only
and nothing of the grader's). The tests below plant ``pytest.py``,
``torch.py`` and ``numpy.py`` in every folder a submission controls that a
host process starts in or near, and read where the judge's processes
actually import from.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmspec.conformance.judge.sandbox import bwrap_problem
from lmspec.tools.grade.outputs import OutError, claim_out

REPO = Path(__file__).resolve().parent.parent
STUDENT = REPO / "tests" / "fixture_repos" / "cs336_student"
PROBE_SUITE = REPO / "tests" / "probes" / "judge_imports.py"
HIJACKS = ("pytest", "torch", "numpy")
NEEDS_BWRAP = pytest.mark.skipif(
    bwrap_problem() is not None and not os.environ.get("LMSPEC_REQUIRE_BWRAP"),
    reason=f"grading a repository needs bubblewrap: {bwrap_problem()}",
)
_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def _plant(folder: Path, markers: Path) -> None:
    """``pytest.py``, ``torch.py`` and ``numpy.py`` in ``folder`` that leave a
    marker (and end the process) when anything imports them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in HIJACKS:
        (folder / f"{name}.py").write_text(
            f"import os\nopen(os.path.join({str(markers)!r}, {name!r} + '-' + str(os.getpid())), 'w').close()\n"
            "raise SystemExit(0)\n"
        )


def _grade(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """``python -m lmspec grade ARGS`` from ``cwd``, as a student runs it from inside a repository."""
    environment = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    environment.pop("LMSPEC_ADAPTER", None)
    return subprocess.run(
        [sys.executable, "-m", "lmspec", "grade", *args], cwd=cwd, env=environment, capture_output=True, timeout=timeout
    )


def _inside(path: str, folder: Path) -> bool:
    return Path(os.path.realpath(path or os.curdir)).is_relative_to(os.path.realpath(folder))


@NEEDS_BWRAP
@pytest.mark.parametrize("jobs", ["1", "2"], ids=["judge", "xdist-workers"])
def test_no_host_process_imports_from_the_submission(tmp_path: Path, jobs: str) -> None:
    """Graded from inside the repository (default --out ./grade-out), with
    pytest.py, torch.py and numpy.py at its top, in its tests/ and in the
    folder the judge used to start in: none is imported on the host, and
    every process that runs the judge's tests (the judge with --jobs 1,
    xdist's workers with --jobs 2) has neither its working folder nor any
    sys.path entry inside the submission, and takes pytest, torch and numpy
    from the grader's environment."""
    repo, markers, probe = tmp_path / "repo", tmp_path / "markers", tmp_path / "probe"
    shutil.copytree(STUDENT, repo)
    markers.mkdir()
    probe.mkdir()
    for folder in (repo, repo / "tests"):
        _plant(folder, markers)
    proc = _grade(repo, ".", "--suite", str(PROBE_SUITE), "--jobs", jobs, env={"LMSPEC_HOST_PROBE": str(probe)})
    console = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert not list(markers.iterdir()), (sorted(p.name for p in markers.iterdir()), console[-3000:])
    records = [json.loads(p.read_text()) for p in probe.iterdir()]
    assert records, f"the probe suite did not run: {console[-3000:]}"
    for record in records:
        assert not _inside(record["cwd"], repo), record
        assert "" not in record["path"], record
        assert not [p for p in record["path"] if _inside(p, repo)], record
        assert not [f for f in record["modules"].values() if _inside(f, repo)], record
    if jobs == "2":  # the tests ran in xdist's workers, not in the judge
        assert all("-c" in r["argv"] or "xdist" in " ".join(r["argv"]) for r in records), records


def test_a_shipped_out_folder_is_refused_and_nothing_in_it_runs(tmp_path: Path) -> None:
    """A submission that ships grade-out/logs/pytest.py (and torch.py,
    numpy.py) is graded from inside itself with the default --out: the
    grader refuses the folder in one line (exit status 2) and leaves it as
    it is; nothing of it is imported."""
    repo, markers = tmp_path / "repo", tmp_path / "markers"
    shutil.copytree(STUDENT, repo)
    markers.mkdir()
    _plant(repo / "grade-out" / "logs", markers)
    _plant(repo / "grade-out", markers)
    proc = _grade(repo, ".", timeout=300)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "which lmspec did not write" in err, err
    assert not list(markers.iterdir())
    assert (repo / "grade-out" / "logs" / "pytest.py").is_file()  # refused, not deleted


def test_out_holding_only_lmspec_files_is_emptied_and_links_are_not_followed(tmp_path: Path) -> None:
    """An earlier grading's folder is emptied before a new one: its files,
    and links that carry lmspec's names, are removed (a link is never
    written through: the file it points at is untouched)."""
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "logs" / "tmp").mkdir(parents=True)
    (out / "logs" / "judge.log").write_text("old log")
    (out / "results.json").write_text("{}")
    (out / "report.html").symlink_to(victim)
    (out / "logs" / "judge-report.json").symlink_to(victim)
    claim_out(out, None)
    assert out.is_dir() and not list(out.iterdir())
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize(
    "layout",
    ["foreign-file", "foreign-log", "folder-named-like-a-file", "the-submission", "above-the-submission", "a-file"],
)
def test_out_that_is_not_lmspecs_is_refused(tmp_path: Path, layout: str) -> None:
    """--out is refused, and left as it is, when it holds anything lmspec
    does not write, when it is or holds the graded submission, or when it is
    not a folder."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    out = {"the-submission": repo, "above-the-submission": tmp_path}.get(layout, tmp_path / "out")
    if layout == "foreign-file":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif layout == "foreign-log":
        (out / "logs").mkdir(parents=True)
        (out / "logs" / "pytest.py").write_text("")
    elif layout == "folder-named-like-a-file":
        (out / "results.json").mkdir(parents=True)
        (out / "results.json" / "keep.txt").write_text("")
    elif layout == "a-file":
        out.write_text("a file")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(OutError, match=r"^--out "):
        claim_out(out, repo)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@NEEDS_BWRAP
@pytest.mark.parametrize("where", ["folder", "one-level-down"])
def test_names_that_are_not_utf8_or_carry_escapes_are_written_escaped(tmp_path: Path, where: str) -> None:
    """A submission folder (or the folder one level down that holds its
    adapter) whose name holds a byte that is not UTF-8 (0x9d), an OSC
    window-title sequence, a BEL and a C1 CSI: every format is written
    (exit status 0 or 1), the name appears escaped (``\\x9d``) and no
    output carries a control character or a lone surrogate."""
    hostile = os.fsdecode(b"sub\x9d\x1b]0;pwned-title\x07\xc2\x9b2J")
    top = tmp_path / (hostile if where == "folder" else "top")
    repo = top if where == "folder" else top / hostile
    shutil.copytree(STUDENT, repo)
    out = tmp_path / "out"
    proc = _grade(
        tmp_path, str(top), "--spec", "2.silu", "--out", str(out), "--format", "table,json,junit,gradescope,html"
    )
    console = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), console.decode("utf-8", "replace")[-3000:]
    assert b"sub\\x9d" in proc.stdout, proc.stdout[:500]
    assert not _CONTROL.findall(console.replace(b"\n", b"").replace(b"\t", b"")), console[:500]
    for name in ("results.json", "junit.xml", "gradescope_results.json", "report.html"):
        data = (out / name).read_bytes()
        data.decode("utf-8")  # valid UTF-8: no lone surrogate reached it
        assert not _CONTROL.findall(data.replace(b"\n", b"").replace(b"\t", b"")), name
        assert b"\\udc" not in data, name
    implementation = json.loads((out / "results.json").read_text())["implementation"]
    assert any("sub\\x9d]0;pwned-title2J" in str(v) for v in implementation.values()), implementation


def test_usage_errors_never_echo_a_name_raw(tmp_path: Path) -> None:
    """A file name with an OSC sequence, a BEL and a byte that is not UTF-8,
    given on the command line (``lmspec grade submissions/*``): the one-line
    usage error names it escaped."""
    bad = tmp_path / os.fsdecode(b"notes\x1b]0;pwned\x07\x9d.txt")
    bad.write_text("x")
    proc = _grade(tmp_path, str(bad), timeout=120)
    assert proc.returncode == 2
    assert b"notes]0;pwned\\x9d.txt" in proc.stderr, proc.stderr
    assert not _CONTROL.findall(proc.stderr.replace(b"\n", b""))


_PEEKS_AT_OUT = """
import os
from lmspec.reference.adapter import *  # noqa: F403


def run_silu(in_features):
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grade-out")
    raise RuntimeError(f"the worker sees grade-out holding {sorted(os.listdir(out))}")
"""


@NEEDS_BWRAP
def test_an_out_folder_inside_the_submission_is_empty_to_the_worker(tmp_path: Path) -> None:
    """Graded from inside itself with the default --out ./grade-out, the
    submission's worker finds that folder empty while the judge writes its
    logs there: the judge's progress and reports are not the worker's to read."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "adapters.py").write_text(_PEEKS_AT_OUT)
    proc = _grade(sub, "adapters.py", "--spec", "2.silu", "--allow-reference", "--jobs", "1", "--quiet")
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    silu = next(i for i in json.loads((sub / "grade-out" / "results.json").read_text())["items"] if i["id"] == "2.silu")
    assert "the worker sees grade-out holding []" in json.dumps(silu), silu["explanation"]
    assert (sub / "grade-out" / "logs" / "judge.log").is_file()
