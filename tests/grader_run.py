"""Running the grader as a user would, for the meta-tests (a helper module,
not a test file)."""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lmspec.conformance.judge.launch import die_with_parent

REPO = Path(__file__).resolve().parent.parent


def run_grader(
    out: Path,
    *args: str,
    env: dict[str, str | None] | None = None,
    timeout: float = 900,
    checkout: Path = REPO,
) -> tuple[int, str, float]:
    """``python -m tools.grade --out OUT --quiet ARGS`` from ``checkout``:
    (exit status, the tail of its output, seconds). ``env`` entries are added
    to (or, set to None, removed from) this process's environment."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")]))
    environment.pop("LMSPEC_ADAPTER", None)
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tools.grade", "--out", str(out), "--quiet", *args],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=die_with_parent(signal.SIGTERM),  # an interrupted test run leaves no grader behind
    )
    return proc.returncode, proc.stdout[-5000:] + proc.stderr[-5000:], time.monotonic() - start


def grade_once(
    shared: Path, name: str, *args: str, prepare: Callable[[Path], None] | None = None, **kw
) -> tuple[int, str, float, Path]:
    """``run_grader(shared / name / "out", *args, **kw)`` done at most once per test run, for
    the tests that check different things of the same grading (the ``shared_gradings``
    fixture, tests/conftest.py, gives ``shared``: one folder for every xdist worker of the
    run). The first test to ask grades, under a lock; the others wait for it and read its
    outcome. ``prepare(folder)`` writes what the grading reads (under the lock, before it).
    (exit status, the tail of its output, seconds, the --out folder)."""
    import fcntl
    import json

    folder = shared / name
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "done.json"
    asked = {"args": list(args), "kw": {k: str(v) for k, v in kw.items()}}
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if prepare is not None:
                prepare(folder)
            rc, output, seconds = run_grader(folder / "out", *args, **kw)
            done.write_text(json.dumps({**asked, "rc": rc, "output": output, "seconds": seconds}))
    graded = json.loads(done.read_text())
    if (graded["args"], graded["kw"]) != (asked["args"], asked["kw"]):
        raise ValueError(f"grading {name!r} was asked for with other arguments: {graded['args']} vs {args}")
    return graded["rc"], graded["output"], graded["seconds"], folder / "out"


SMALL_SUITE = REPO / "tests" / "grader_fixtures" / "suite_small.py"


def _small_batch_submissions(folder: Path) -> None:
    good = (REPO / "tests" / "grader_fixtures" / "adapter_good.py").read_text()
    subs = folder / "subs"
    shutil.rmtree(subs, ignore_errors=True)
    (subs / "alice" / "tests").mkdir(parents=True)
    (subs / "alice" / "tests" / "adapters.py").write_text(good)
    (subs / "bob").mkdir()
    (subs / "bob" / "adapters.py").write_text("def run_softmax(x, dim):\n    return x\n")
    (subs / "carol").mkdir()
    (subs / "dave.py").write_text(good)


def small_batch(shared: Path) -> tuple[int, str, Path]:
    """A real batch on the stand-in suite, graded once per run (tests/test_grade.py reads its
    formats, tests/test_html.py its dashboard): alice (a repository, tests/adapters.py, correct),
    bob (adapters.py at the top, softmax wrong, the rest missing), carol (no adapter), dave (a
    single file, correct). Two Dask workers, two judge processes each. (exit status, output, --out)."""
    subs = shared / "small_batch" / "subs"
    rc, output, _, out = grade_once(
        shared,
        "small_batch",
        "--batch",
        str(subs),
        "--suite",
        str(SMALL_SUITE),
        "--jobs",
        "2",
        "--workers",
        "2",
        prepare=_small_batch_submissions,
    )
    return rc, output, out
