"""Meta-tests of ``lmspec grade --batch`` on Dask distributed
(tools/grade/batch.py, tools/grade/distributed.py): submissions travel as
deterministic archives; a content hash (archive plus the settings that
change results) makes a batch resumable; a worker that dies costs a retry
elsewhere, never the batch; a client killed mid-batch loses nothing that
was finished, and the rerun grades only the rest.

Real gradings use the stand-in suite (tests/grader_fixtures/suite_small.py)
to stay fast; the resume rules are checked with a stand-in task.
"""

import csv
import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="lmspec grade --batch needs the 'batch' extra (Dask distributed)")

import cloudpickle

from lmspec.conformance.options import Settings
from lmspec.tools.grade import archive, batch, distributed

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "grader_fixtures"
SMALL_SUITE = FIXTURES / "suite_small.py"
GOOD = (FIXTURES / "adapter_good.py").read_text()
# the stand-in tasks below run on Dask workers, which cannot import this test module
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _settings(**kw) -> Settings:
    return Settings(jobs=1, suite=(str(SMALL_SUITE),), **kw)


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("LMSPEC_ADAPTER", None)
    (tmp / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp / "tmp")  # Dask's scratch space and the tasks' folders stay in the test's folder
    return env


def _rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "summary.csv") as f:
        return {r["name"]: r for r in csv.DictReader(f)}


# --- archives ------------------------------------------------------------------------------------------
def test_archive_is_deterministic_and_skips_what_never_travels(tmp_path: Path) -> None:
    """Same content, same bytes (times and owners left out); .git travels empty as the root marker;
    caches, environments and huge files stay home."""
    sub = tmp_path / "alice"
    (sub / "tests").mkdir(parents=True)
    (sub / "tests" / "adapters.py").write_text(GOOD)
    (sub / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (sub / ".git" / "objects").mkdir(parents=True)
    (sub / ".git" / "objects" / "big").write_bytes(b"x" * 1000)
    (sub / "__pycache__").mkdir()
    (sub / "__pycache__" / "m.pyc").write_bytes(b"\0")
    (sub / ".venv" / "lib").mkdir(parents=True)
    first = distributed.pack(sub)
    os.utime(sub / "tests" / "adapters.py", (1, 1))
    assert distributed.pack(sub).sha256 == first.sha256
    (sub / "data.bin").write_bytes(b"\0")
    assert distributed.pack(sub).sha256 != first.sha256
    (sub / "data.bin").unlink()
    original = archive.MAX_FILE_BYTES
    archive.MAX_FILE_BYTES = 10
    try:
        skipped = archive.pack(sub).skipped
    finally:
        archive.MAX_FILE_BYTES = original
    assert any(s.startswith("pyproject.toml (") for s in skipped)
    assert {"__pycache__/", ".venv/"} <= set(first.skipped)
    dest = tmp_path / "unpacked"
    distributed.unpack(first.archive, dest)
    assert (dest / "tests" / "adapters.py").read_text() == GOOD
    assert (dest / ".git").is_dir() and not any((dest / ".git").iterdir())
    assert not (dest / "__pycache__").exists() and not (dest / ".venv").exists()
    single = tmp_path / "bob.py"
    single.write_text(GOOD)
    distributed.unpack(distributed.pack(single).archive, tmp_path / "bob")
    assert (tmp_path / "bob" / "adapters.py").read_text() == GOOD


def test_submissions_are_folders_and_single_files(tmp_path: Path) -> None:
    for name in ("alice", "bob", ".hidden", "__pycache__"):
        (tmp_path / name).mkdir()
    for name in ("carol.py", "bob.py", "_helper.py", "notes.txt"):
        (tmp_path / name).write_text("")
    found = {s.name: s.path.name for s in batch.find_submissions(tmp_path)}
    assert found == {"alice": "alice", "bob": "bob", "bob.py": "bob.py", "carol": "carol.py"}


def test_content_hash_follows_the_settings_that_change_results(tmp_path: Path) -> None:
    """The hash changes with the submission and with settings such as --spec, not with --jobs."""
    (tmp_path / "a.py").write_text(GOOD)
    packed = distributed.pack(tmp_path / "a.py")

    def digest(**kw) -> str:
        settings = kw.pop("settings", _settings())
        payload = distributed.make_payload(settings, points=batch.PointsTable(), formats=("json",), fixtures=None)
        return distributed.content_hash(packed, payload)

    base = digest()
    assert digest() == base
    assert digest(settings=Settings(jobs=4, suite=(str(SMALL_SUITE),))) == base
    assert digest(settings=_settings(spec="2.softmax")) != base
    assert digest(settings=Settings(jobs=1)) != base


def _payload(fixtures: Path | None = None) -> distributed.Payload:
    return distributed.make_payload(_settings(), points=batch.PointsTable(), formats=("json",), fixtures=fixtures)


def test_a_worker_with_other_lmspec_code_refuses(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(GOOD)
    payload = _payload()
    other = dataclasses.replace(payload, lmspec_digest="0" * 64)
    result = distributed.grade_archive(distributed.pack(tmp_path / "a.py").archive, "a", "h", other)
    assert result.error and "install the same lmspec on every worker" in result.error and not result.files


def test_fixtures_travel_with_the_batch(tmp_path: Path) -> None:
    """The client's oracle files are packed into the payload and unpacked once per worker machine."""
    (tmp_path / "fx").mkdir()
    (tmp_path / "fx" / "corpus.en").write_text("hello")
    payload = _payload(fixtures=tmp_path / "fx")
    settings = distributed._worker_settings(payload)
    assert Path(settings.fixtures, "corpus.en").read_text() == "hello"
    assert [Path(p).name for p in settings.suite] == ["0_suite_small.py"]


# --- resuming: a stand-in task ---------------------------------------------------------------------
def fake_task(calls: str, archive: bytes, name: str, digest: str, payload) -> "distributed.TaskResult":
    """Records the call and returns results without grading."""
    Path(calls, f"{name}-{time.monotonic_ns()}").touch()
    data = {
        "score": 1,
        "max_score": 1,
        "percent": 100.0,
        "passed": True,
        "items": [],
        "batch": {"content_hash": digest},
    }
    files = {"results.json": json.dumps(data).encode(), "report.html": b"<html></html>"}
    return distributed.TaskResult(name, files, worker="fake")


def test_two_batches_at_once_each_serve_on_a_free_loopback_port() -> None:
    """The local cluster's scheduler serves HTTP on the loopback only, on a port of its own: a
    second batch started while one runs neither fights over Dask's default port nor warns."""
    import warnings
    from urllib.parse import urlsplit

    opened = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                opened.append(distributed.open_client(None, 1, quiet=True))
        links = [urlsplit(client.dashboard_link) for client, _ in opened]
        assert [link.hostname for link in links] == ["127.0.0.1", "127.0.0.1"], links
        assert links[0].port != links[1].port, links
        assert not [str(w.message) for w in caught if "in use" in str(w.message)]
    finally:
        for client, cluster in opened:
            client.close()
            cluster.close()


def test_resume_grades_only_what_changed(tmp_path: Path) -> None:
    subs, out, calls = tmp_path / "subs", tmp_path / "out", tmp_path / "calls"
    subs.mkdir()
    calls.mkdir()
    for name in ("a", "b", "c"):
        (subs / f"{name}.py").write_text(GOOD)
    task = functools.partial(fake_task, str(calls))

    def run(**kw) -> set[str]:
        for f in calls.iterdir():
            f.unlink()
        settings = kw.pop("settings", _settings()).replace(workers=1, quiet=True, **kw)
        rc = batch.grade_batch(subs, out=out, settings=settings, task=task)
        assert rc == 0
        return {f.name.split("-")[0] for f in calls.iterdir()}

    assert run() == {"a", "b", "c"}
    assert run() == set()
    rows = _rows(out)
    assert {r["reused"] for r in rows.values()} == {"True"}
    assert rows["a"]["content_hash"] == json.loads((out / "a" / "results.json").read_text())["batch"]["content_hash"]
    (subs / "b.py").write_text(GOOD + "\n# changed\n")
    assert run() == {"b"}
    assert run(regrade=True) == {"a", "b", "c"}
    assert run(settings=_settings(spec="2.softmax")) == {"a", "b", "c"}
    assert (out / "dashboard.html").is_file() and (out / "spec.html").is_file()


# --- a worker that dies ----------------------------------------------------------------------------------
def kill_worker_once(marker: str, victim: str, archive: bytes, name: str, digest: str, payload):
    """The real task, except that it kills its own worker process the first time it runs ``victim``."""
    if name == victim and not Path(marker).exists():
        Path(marker).write_text(distributed.worker_name())
        os.kill(os.getpid(), signal.SIGKILL)
    return distributed.grade_archive(archive, name, digest, payload)


@pytest.mark.slow
def test_a_dead_worker_costs_a_retry_not_the_batch(tmp_path: Path) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("alice", "bob", "carol"):
        (subs / f"{name}.py").write_text(GOOD)
    marker = tmp_path / "killed"
    task = functools.partial(kill_worker_once, str(marker), "bob")
    rc = batch.grade_batch(subs, out=out, settings=_settings(workers=2, quiet=True), task=task)
    rows = _rows(out)
    assert marker.exists(), "the stand-in task never killed its worker"
    assert rc == 0 and all(r["passed"] == "True" and not r["error"] for r in rows.values()), rows
    assert rows["bob"]["worker"] != marker.read_text(), "bob was not graded again by another worker process"
    assert json.loads((out / "bob" / "results.json").read_text())["score"] == float(rows["bob"]["max_score"])


# --- a client killed mid-batch -------------------------------------------------------------------------
@pytest.mark.slow
def test_client_killed_mid_batch_then_rerun_grades_only_the_rest(tmp_path: Path) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    names = [f"s{k}" for k in range(5)]
    for name in names:
        (subs / f"{name}.py").write_text(GOOD)
    command = [
        sys.executable,
        "-m",
        "tools.grade",
        "--batch",
        str(subs),
        "--out",
        str(out),
        "--suite",
        str(SMALL_SUITE),
    ]
    env = _env(tmp_path)
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen(
            [*command, "--workers", "1"], cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True
        )
        deadline = time.monotonic() + 300
        while len(list(out.glob("*/results.json"))) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # the client, its local cluster and its workers
        proc.wait()
    done = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/results.json")}
    assert 2 <= len(done) < len(names), (done, (tmp_path / "first.log").read_text()[-3000:])
    assert not (out / "summary.csv").exists()
    rerun = subprocess.run([*command, "--workers", "2"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert f"{len(done)} already graded with these settings" in rerun.stderr
    rows = _rows(out)
    assert {n for n, r in rows.items() if r["reused"] == "True"} == set(done)
    assert {n for n, r in rows.items() if r["reused"] == "False"} == set(names) - set(done)
    assert all(r["passed"] == "True" for r in rows.values())
    assert {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/results.json") if p.parent.name in done} == done
    assert not list(out.glob(".*.partial")), "a staging folder was left behind"


# --- an interrupted batch ----------------------------------------------------------------------------
HANGING = "import time\n\n\ndef run_softmax(x, dim):\n    time.sleep(300)\n    return x.softmax(dim)\n"


def _judges(tmp: Path) -> list[int]:
    """The judges graded for this test (their report lies under its TMPDIR)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "--lmspec-report" in cmdline and str(tmp) in cmdline[cmdline.index("--lmspec-report") + 1]:
            found.append(proc.info["pid"])
    return found


@pytest.mark.slow
def test_an_interrupted_batch_stops_its_gradings(tmp_path: Path) -> None:
    """Ctrl-C stops the batch (exit status 2) and the judges its workers were running, which
    run in sessions of their own and would otherwise go on until their own time limit."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("slow1", "slow2"):
        (subs / f"{name}.py").write_text(HANGING)
    command = [sys.executable, "-m", "tools.grade", "--batch", str(subs), "--out", str(out), f"--suite={SMALL_SUITE}"]
    proc = subprocess.Popen(
        [*command, "--workers", "2", "--timeout-per-call", "600"],
        cwd=REPO,
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    )
    try:
        deadline = time.monotonic() + 120
        while len(_judges(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_judges(tmp_path)) == 2, "the batch never started its judges"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 2
        deadline = time.monotonic() + 15
        while _judges(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _judges(tmp_path), "judges outlived the interrupted batch"
    finally:
        for pid in _judges(tmp_path):
            os.killpg(pid, signal.SIGKILL)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _batch_of_two(tmp_path: Path) -> Path:
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "adapters.py").write_text(GOOD)
    (subs / "bob.py").write_text(GOOD)
    return subs


def test_batch_out_inside_a_submission_is_a_usage_error(tmp_path: Path) -> None:
    """A batch reads its --out back (an unchanged submission keeps its earlier
    results.json), so a results.json a student planted there with the right
    content hash would be a grade nobody graded: ``--out`` inside a
    submission is a one-line usage error (exit 2); nothing is graded or written."""
    subs = _batch_of_two(tmp_path)
    env = _env(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-m", "lmspec", "grade", "--batch", str(subs), "--out", str(subs / "alice" / "grades")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"lmspec grade: error: --out {subs}/alice/grades: inside the submission 'alice'; "
        "choose a folder outside the submissions (see lmspec grade --help)\n"
    )
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("where", ["the-batch", "deep-in-a-submission", "in-a-file-submission", "above-the-batch"])
def test_batch_out_that_a_submission_could_write_is_refused(tmp_path: Path, where: str) -> None:
    """The batch folder itself, a folder deep in a submission, one named after a single-file
    submission's folder and one above the batch are refused too."""
    from lmspec.tools.grade.outputs import OutError, claim_batch_out

    subs = _batch_of_two(tmp_path)
    out = {
        "the-batch": subs,
        "deep-in-a-submission": subs / "alice" / "a" / "b",
        "in-a-file-submission": subs / "bob.py" / "x",
        "above-the-batch": tmp_path,
    }[where]
    with pytest.raises(OutError, match=r"^--out "):
        claim_batch_out(out, subs)


def test_batch_out_beside_the_submissions_is_taken(tmp_path: Path) -> None:
    """A folder of the batch named like no submission (``_grades``) is fine, as is one elsewhere."""
    from lmspec.tools.grade.outputs import claim_batch_out

    subs = _batch_of_two(tmp_path)
    for out in (subs / "_grades", tmp_path / "grades"):
        claim_batch_out(out, subs)
