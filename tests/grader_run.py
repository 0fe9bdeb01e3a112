"""Running the grader as a user would, for the meta-tests (a helper module,
not a test file)."""

import os
import signal
import subprocess
import sys
import time
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
