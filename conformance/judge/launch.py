"""Run the judge: one pytest process (with xdist workers) over the
profile's test modules, which starts the sandboxed workers itself
(conformance/plugin.py). The judge is trusted code, so there is nothing to
recover from here but its overall deadline; every fault of the submission is
contained by the worker and reported per test.

The judge gets the Target as one JSON file (``--lmspec-target``) and every
other setting as the options conformance/options.py marks ``judge``. The
same function serves the grader, the mutant runner and the variant runner
(one harness).
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmspec import ROOT
from lmspec.conformance import options, profiles
from lmspec.conformance.plain import plain_data
from lmspec.conformance.target import Target

LOG_CAP = 2_000_000


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets ``sig`` when the thread that started
    it ends (PR_SET_PDEATHSIG), so a killed grader or test run leaves no
    judge behind (the judge, told by SIGTERM, ends its whole process group:
    conformance/plugin.py). A no-op where prctl does not exist."""

    def apply() -> None:
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, sig)

    return apply


def end_group_on_sigterm() -> None:
    """In a judge that leads its own process group (the grader starts it so):
    SIGTERM ends the group at once, its xdist workers included (their
    sandboxed workers die with them)."""
    if os.getpgid(0) != os.getpid():
        return

    def end(signum: int, frame: Any) -> None:
        os.killpg(os.getpid(), signal.SIGKILL)

    signal.signal(signal.SIGTERM, end)


def suite_paths(settings: Any, target: Target) -> list[str]:
    """The test paths the judge runs: --suite, else the profile's test modules."""
    if settings.suite:
        return list(settings.suite)
    return [str(ROOT / "conformance" / t) for t in profiles.get(target.profile).tests]


@dataclass
class Progress:
    done: int
    total: int | None
    nodeid: str | None = None
    outcome: str | None = None
    failures: int = 0


#: pytest's exit statuses for a run that collected nothing because of the suite or its own
#: arguments (collection errors, an internal error, a usage error): no test of the submission ran
_SUITE_DID_NOT_RUN = (2, 3, 4)


@dataclass
class JudgeRun:
    report: dict[str, Any] | None  # the judge's --lmspec-report (conformance/report.py)
    returncode: int | None
    seconds: float
    timed_out: bool
    log: Path
    started_at: float = 0.0  # wall clock when the judge process was started

    @property
    def problem(self) -> str | None:
        """Why there is no report (or one without a single test), when that is so."""
        if self.report is not None:
            broken = self.report.get("collection_errors") or []
            if broken:
                return (
                    f"the suite itself is broken: {len(broken)} of its modules could not be collected"
                    f" ({'; '.join(broken[:3])}): the grader's own error, not the submission's; see {self.log}"
                )
            if not self.report.get("tests") and self.returncode in _SUITE_DID_NOT_RUN:
                return (
                    f"the suite itself did not run (pytest exit status {self.returncode}: the grader's own error,"
                    f" not the submission's; see {self.log})"
                )
            return None
        if self.timed_out:
            return "the judge ran out of time before writing its report"
        return f"the judge exited with status {self.returncode} without a report (see {self.log})"


def judge_command(
    target_file: Path, settings: Any, target: Target, report: Path, progress: Path, basetemp: Path | None = None
) -> list[str]:
    plugins = ("xdist.plugin", "pytest_timeout", "_hypothesis_pytestplugin", "no:cacheprovider")
    # the plugin explicitly, and no conftest.py at all: a submission's own
    # conftest (or tests) can never be loaded by the judge
    suite = suite_paths(settings, target)
    args = [sys.executable, "-m", "pytest", *suite, "-q", "--tb=short", "--rootdir", str(ROOT), "--noconftest"]
    for plugin in (*plugins, "lmspec.conformance.plugin"):
        args += ["-p", plugin]
    args += ["--lmspec-target", str(target_file), "--lmspec-report", str(report), "--lmspec-progress", str(progress)]
    if basetemp is not None:  # the tests' temporary files, in the judge's private folder (removed after)
        args += ["--basetemp", str(basetemp)]
    args += options.judge_arguments(settings.replace(profile=target.profile))
    args += ["--hypothesis-profile", settings.hypothesis_profile]
    # the judge's own backstop per test (every call into the worker has its own limit)
    args += ["--timeout", f"{max(300.0, 5 * settings.timeout_per_call):g}", "--timeout-method", "signal"]
    jobs = judge_processes(settings, target)
    if jobs > 1:
        args += ["-n", str(jobs)]
    return args


def judge_processes(settings: Any, target: Target) -> int:
    """--jobs, but no more judge processes than the items --spec selects: each one starts a judge
    and a sandboxed worker of its own (BENCHMARKS.md section 13), which one item's tests seldom
    outlast."""
    jobs = settings.jobs or 1
    if jobs > 1 and profiles.selectors(settings.spec):
        jobs = max(1, min(jobs, len(profiles.get(target.profile).selected(settings.spec))))
    return jobs


def _environment() -> dict[str, str]:
    """The judge's variables: ours, with lmspec's own folder first on the
    import path and PYTHONSAFEPATH set (as ``-P``), so that neither the judge
    nor the processes it starts (pytest-xdist's workers run ``python -c``)
    put their working folder on sys.path (issue 32: a ``pytest.py`` there
    would run as the judge)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LMSPEC_ADAPTER", "COV_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no stray plugins (randomly, cov...)
    return env


def _poll_progress(path: Path, pos: int, state: dict[str, Any], progress: Callable[[Progress], None] | None) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            data = f.read()
    except OSError:
        return pos
    complete = data[: data.rfind(b"\n") + 1]
    for line in complete.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if "collected" in event:
            state["total"] = int(event["collected"])
        elif "nodeid" in event:
            state["done"] += 1
            state["failures"] += event.get("outcome") in ("failed", "error", "timeout")
            if progress is not None:
                progress(
                    Progress(state["done"], state["total"], event["nodeid"], event.get("outcome"), state["failures"])
                )
    return pos + len(complete)


def run_judge(
    target: Target,
    settings: Any,
    workdir: Path,
    progress: Callable[[Progress], None] | None = None,
    server: Any = None,
) -> JudgeRun:
    """Run the suite on ``target`` with ``settings`` (conformance/options.py)
    and read the report. The judge writes its report, progress and log into
    ``workdir``; it runs in a private folder of its own (its working folder,
    its target file and its tests' temporary files), never in ``workdir``,
    which may lie inside a submission (``cd repo && lmspec grade .``).
    ``server``: a judge.forkserver.ForkServer to fork the judge from (many
    short gradings in a row)."""
    workdir = workdir.resolve()  # the judge's paths must not be relative to ours
    workdir.mkdir(parents=True, exist_ok=True)
    report, progress_file, log = workdir / "judge-report.json", workdir / "progress.jsonl", workdir / "judge.log"
    for stale in (report, progress_file, log):  # a link left there is removed, never written through
        stale.unlink(missing_ok=True)
    private = Path(tempfile.mkdtemp(prefix="lmspec-judge-"))
    try:
        return _run(target, settings, private, report, progress_file, log, progress, server)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _run(
    target: Target,
    settings: Any,
    private: Path,
    report: Path,
    progress_file: Path,
    log: Path,
    progress: Callable[[Progress], None] | None,
    server: Any,
) -> JudgeRun:
    start = time.monotonic()
    started_at = time.time()
    deadline = start + settings.timeout
    timed_out = False
    state = {"done": 0, "total": None, "failures": 0}
    pos = 0
    with open(log, "wb") as out:
        command = judge_command(
            target.save(private / "target.json"), settings, target, report, progress_file, private / "tmp"
        )
        forked = server.judge(command, private, _environment(), log) if server is not None else None
        proc = forked or subprocess.Popen(
            command,
            cwd=private,
            env=_environment(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(signal.SIGTERM),
        )
        try:
            while proc.poll() is None:
                pos = _poll_progress(progress_file, pos, state, progress)
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.2)  # returns as the judge ends, not up to 0.2 s after
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL if timed_out or proc.poll() is None else signal.SIGTERM)
            proc.wait()
    _poll_progress(progress_file, pos, state, progress)
    if log.stat().st_size > LOG_CAP:
        with open(log, "r+b") as f:
            f.truncate(LOG_CAP)
    data = None
    if report.is_file():
        try:
            data = plain_data(json.loads(report.read_text()))
        except ValueError:
            data = None
    if data is None and timed_out:
        data = _partial_report(progress_file)
    return JudgeRun(data, proc.returncode, time.monotonic() - start, timed_out, log, started_at)


def _partial_report(progress_file: Path) -> dict[str, Any]:
    """The results the judge streamed before it was stopped at the overall deadline."""
    tests = []
    if progress_file.exists():
        for line in progress_file.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if "nodeid" in event and "record" in event:
                tests.append(plain_data(event["record"]))
    return {"tests": tests, "partial": True, "warnings": [], "compromised": [], "faults": []}
