"""A judge starts its sandboxed worker when it starts, not at the first test
that needs it: the worker loads Python, torch and the submission while the
judge imports torch and collects (conformance/session.py, start_early;
issue 29: the two start-ups, 3-4 s each, used to follow one another).
pytest-xdist's controller, which runs no test, imports no torch and starts
no worker; a worker no test used is ended with its judge process. And a
grading never starts more judge processes than the items --spec selects."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmspec.conformance.judge.launch import judge_processes
from lmspec.conformance.options import Settings
from lmspec.conformance.target import Target

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("jobs", ["1", "2"], ids=["judge", "xdist"])
def test_each_process_that_runs_tests_starts_its_worker_before_it_imports_torch(tmp_path: Path, jobs: str) -> None:
    """One test of 2.silu on the reference (sandboxed where bubblewrap works): with ``-n 2`` one
    of xdist's two processes gets no test; its worker, started all the same, has ended with it."""
    probe = tmp_path / "probe"
    probe.mkdir()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests" / "probes")]),
        LMSPEC_START_PROBE=str(probe),
    )
    env.pop("LMSPEC_ADAPTER", None)
    suite = REPO / "conformance" / "cs336" / "test_nn_ops.py"
    cmd = [sys.executable, "-m", "pytest", "-p", "judge_start", str(suite), "--profile", "cs336", "--spec", "2.silu"]
    cmd += ["-k", "test_silu_matches_float64", "-p", "no:cacheprovider", "-q"]
    cmd += ["-n", jobs] if jobs != "1" else []  # as the grader starts its judge (-n 1 is xdist's too)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    records = {r["pid"]: r for r in (json.loads(p.read_text()) for p in probe.iterdir())}
    testing = [r for r in records.values() if r["role"] == ("judge" if jobs == "1" else "xdist-worker")]
    assert len(testing) == int(jobs), records
    for record in testing:
        assert not record["torch_before_probe"], record
        assert record["worker_started_at"] is not None, f"no worker started ahead of the first test: {record}"
        assert record["torch_at"] is not None and record["worker_started_at"] < record["torch_at"], record
        assert record["worker_ended"], f"a worker outlived its judge process: {record}"
    used = [r for r in testing if r["used_the_early_worker"]]
    assert len(used) == 1 and used[0]["worker_starts"] == 1, records
    if jobs == "2":
        (controller,) = [r for r in records.values() if r["role"] == "judge"]
        assert controller["worker_started_at"] is None and not controller["torch_imported"], controller


@pytest.mark.parametrize(
    ("spec", "jobs", "expected"),
    [
        (None, 4, 4),
        ("2.silu", 4, 1),
        ("2.silu,2.softmax", 4, 2),
        ("2.silu , 2.softmax", 1, 1),
        ("2", 3, 3),
        ("3", 2, 2),
    ],
)
def test_no_more_judge_processes_than_selected_items(spec: str | None, jobs: int, expected: int) -> None:
    target = Target(
        given="reference", adapter="lmspec.reference.adapters", root=None, name="reference", profile="cs336"
    )
    assert judge_processes(Settings(jobs=jobs, spec=spec), target) == expected


def test_a_worker_started_early_ends_when_the_implementation_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The early worker belongs to the session until a connection takes it: a failure before that
    ends it there and then, and ending it again (the connection may have) closes nothing twice."""
    from lmspec.conformance.judge import implementation
    from lmspec.conformance.session import JudgeSession

    session = JudgeSession(Settings(sandbox="none"), tmp_path, xdist_worker=False)
    session.start_early()
    early = session._early
    assert early is not None and early.alive()

    def cannot(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no implementation")

    monkeypatch.setattr(implementation, "Implementation", cannot)
    with pytest.raises(RuntimeError, match="no implementation"):
        session.implementation()
    assert early.proc.poll() is not None and session._early is None
    read, write = os.pipe()  # may be given the descriptors the channel closed
    try:
        early.kill()
        os.write(write, b"x")
        assert os.read(read, 1) == b"x"
    finally:
        os.close(read)
        os.close(write)
