"""pytest plugin loaded into the grading child (``-p tools.grade.stream``).

It appends one JSON line per event to ``--lmspec-stream`` as tests start and
finish, so the grader can tell which test was running when a process died
(segfault, ``os._exit``, a kill for time or memory) and re-run the rest in a
new process. Each line is written with one ``os.write`` on an ``O_APPEND``
descriptor, so xdist workers can share the file.

Events (``ev``): ``configure`` (pid, role), ``collected`` (nodeids with spec
ids, adapter and environment), ``start``/``report``/``finish`` per test,
``sessionfinish``. The plugin also arms a second per-test deadline that raises
a ``BaseException`` (Hypothesis catches pytest-timeout's ``Failed`` and
replays the example, which turns a hang into an endless loop), and writes
fatal-signal tracebacks (faulthandler) to ``fault-<pid>.log`` beside the stream.

Only the standard library and pytest are imported here: the plugin is loaded
before the implementation under test.
"""

import contextlib
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

_FD: int | None = None
_FAULT_FILE = None
_ROLE = "main"
_PID = os.getpid()
# Taken at import, before the implementation under test can replace them.
_write = os.write
_dumps = json.dumps
_time = time.time


_SECTION_CAP = 200_000  # characters of captured output kept per report section
_real_exit = os._exit


def _traced_exit(status: int) -> None:
    """os._exit, first telling the grader which status the process ended with."""
    _emit(ev="exit", status=status)
    _real_exit(status)


class GradeTimeout(BaseException):
    """Raised into a test that outlived its deadline. A BaseException so that
    neither Hypothesis nor ``except Exception`` in the implementation swallows it."""


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("lmspec-grade", "lmspec grader (internal)")
    g.addoption("--lmspec-stream", default=None, help="append per-test JSON lines here")
    g.addoption("--lmspec-only", default=None, help="file of nodeids: run only these")
    g.addoption("--lmspec-deadline", type=float, default=0.0, help="raise GradeTimeout after S seconds")


def _emit(**event: Any) -> None:
    if _FD is None:
        return
    event.setdefault("pid", _PID)
    event.setdefault("t", round(_time(), 3))
    data = (_dumps(event, default=repr) + "\n").encode("utf-8", "replace")
    with contextlib.suppress(OSError):  # a full disk or a file-size limit must not break the run
        _write(_FD, data)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Runs before conformance.plugin imports the adapter, so a crash during
    the import is already traced."""
    global _FD, _FAULT_FILE, _ROLE, _PID
    path = config.getoption("lmspec_stream")
    if not path:
        return
    _PID = os.getpid()
    _FD = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    if hasattr(config, "workerinput"):
        _ROLE = "worker"
    elif getattr(config.option, "numprocesses", None):
        _ROLE = "controller"
    if _ROLE != "controller":
        _FAULT_FILE = open(Path(path).with_name(f"fault-{_PID}.log"), "w")  # noqa: SIM115
        faulthandler.enable(file=_FAULT_FILE, all_threads=True)
        os._exit = _traced_exit  # an implementation calling os._exit is named as such
    _emit(ev="configure", role=_ROLE, worker=getattr(config, "workerinput", {}).get("workerid"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only = config.getoption("lmspec_only")
    if not only:
        return
    wanted = set(Path(only).read_text().splitlines())
    keep = [it for it in items if it.nodeid in wanted]
    drop = [it for it in items if it.nodeid not in wanted]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _adapter_info() -> dict[str, Any]:
    plugin = sys.modules.get("conformance.plugin")
    adapter = getattr(plugin, "_ADAPTER", None)
    info: dict[str, Any] = {"error": getattr(plugin, "_ADAPTER_ERROR", None)}
    if adapter is not None:
        info.update(
            spec=adapter.spec,
            origin=adapter.origin,
            missing_core=adapter.missing_core,
            missing_extended=adapter.missing_extended,
        )
    return info


def _environment() -> dict[str, Any]:
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": sys.platform}
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = getattr(torch, "__version__", "?")
        try:
            env["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        except Exception:  # a broken CUDA setup is reported, not fatal
            env["device"] = "cpu"
        env["threads"] = torch.get_num_threads()
    return env


def pytest_collection_finish(session: pytest.Session) -> None:
    if _ROLE == "controller":
        return
    tests = []
    for item in session.items:
        marker = item.get_closest_marker("spec")
        tests.append([item.nodeid, marker.args[0] if marker and marker.args else None])
    integrity = getattr(session.config, "_lmspec_integrity", None)
    _emit(
        ev="collected",
        tests=tests,
        adapter=_adapter_info(),
        environment=_environment(),
        tampering=list(getattr(integrity, "import_findings", []) or []),
    )


# --- second deadline: a signal from a timer thread raises GradeTimeout ---------
_DEADLINE_SIG = signal.SIGUSR2
_armed: dict[str, Any] = {"until": None, "nodeid": None}
_cond = threading.Condition()


def _raise_timeout(signum: int, frame: Any) -> None:
    if not _armed.get("active"):  # the test finished while the signal was in flight
        return
    _armed["active"] = False
    limit = _armed.get("limit") or 0.0
    raise GradeTimeout(f"Timeout: the test ran past {limit:g} s (grader deadline)")


def _deadline_thread() -> None:
    while True:
        with _cond:
            until = _armed["until"]
            if until is None:
                _cond.wait()
                continue
            left = until - time.monotonic()
            if left > 0:
                _cond.wait(left)
                continue
            _armed["until"] = None
        os.kill(os.getpid(), _DEADLINE_SIG)


def _arm(seconds: float, nodeid: str) -> None:
    if seconds <= 0:
        return
    if not _armed.get("thread"):
        _armed["thread"] = threading.Thread(target=_deadline_thread, name="lmspec-deadline", daemon=True)
        _armed["thread"].start()
    signal.signal(_DEADLINE_SIG, _raise_timeout)
    with _cond:
        _armed.update(until=time.monotonic() + seconds, nodeid=nodeid, limit=seconds, active=True)
        _cond.notify()


def _disarm() -> None:
    with _cond:
        _armed.update(until=None, active=False)
        _cond.notify()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if _ROLE != "controller" and threading.current_thread() is threading.main_thread():
        _arm(item.config.getoption("lmspec_deadline"), item.nodeid)
    try:
        yield
    finally:
        _disarm()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Cap the captured output kept in the report: megabytes of prints must not
    reach xdist's serializer or the terminal (the size is recorded)."""
    report = yield
    size = 0
    sections = []
    for title, content in report.sections:
        size += len(content)
        if len(content) > _SECTION_CAP:
            cut = len(content) - _SECTION_CAP
            half = _SECTION_CAP // 2
            content = f"{content[:half]}\n[... {cut} characters cut by the grader ...]\n{content[-half:]}"
        sections.append((title, content))
    report.sections = sections
    report.lmspec_output_bytes = size
    return report


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    if _ROLE != "controller":
        _emit(ev="start", nodeid=nodeid)


def _message(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    lines = text.strip().splitlines()
    return lines[0][:500] if lines else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _ROLE == "controller":
        return
    props = {}
    for key, value in report.user_properties:
        props[str(key)] = value
    _emit(
        ev="report",
        nodeid=report.nodeid,
        when=report.when,
        outcome=report.outcome,
        wasxfail=hasattr(report, "wasxfail"),
        message=_message(report),
        duration=round(report.duration, 4),
        output_bytes=getattr(report, "lmspec_output_bytes", 0),
        props=props,
    )


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    if _ROLE != "controller":
        _emit(ev="finish", nodeid=nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _emit(ev="sessionfinish", role=_ROLE, exitstatus=int(exitstatus))
