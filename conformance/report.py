"""The judge's per-test report (``--lmspec-report PATH``), read by the grader.

Each test gets one record, in the suite's order: its spec item and strength, an Outcome
(conformance/outcomes.py), its message and a one-line summary. The message
is the first real failure: of a Hypothesis group of distinct failures, the
first one, with its falsifying example; the summary is its first line plus
the "likely cause" line when the failure names one. Run-level facts come from
every judge process through the session folder: the worker's ready report
(origin, versions, an import error), warnings (no sandbox), the faults
registry, and compromise findings (lmspec's own code reached from the
submission).
"""

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _pytest.outcomes import OutcomeException

from lmspec import ROOT
from lmspec.conformance.judge.faults import Fault, SubmissionError
from lmspec.conformance.judge.sandbox import Paths
from lmspec.conformance.outcomes import NOT_CHECKED_PREFIX, Outcome

SCHEMA = "lmspec-judge/1"
MESSAGE_CHARS = 3000
_LMSPEC_DIRS = tuple(str(ROOT / d) + "/" for d in ("reference", "conformance", "tools"))


#: When this module was imported: Python, pytest, torch, Hypothesis and the
#: suite's plugin are loaded by then (the judge's start-up).
IMPORTED_AT = time.time()
_PHASE = re.compile(r"during (\w+) phase \(([\d.]+) seconds\)")
_STOPPED = re.compile(r"Stopped because (.+)")


def configure(config: pytest.Config) -> None:
    config._lmspec_results = {}  # type: ignore[attr-defined]
    config._lmspec_started = time.time()  # type: ignore[attr-defined]
    config._lmspec_stamps = {"imported": IMPORTED_AT, "configured": time.time()}  # type: ignore[attr-defined]
    config.pluginmanager.register(_Hooks(config), "lmspec-report")


def _session_dir(config: pytest.Config) -> Path:
    return config._lmspec_session.session_dir  # type: ignore[attr-defined]


def _process_tag(config: pytest.Config) -> str:
    workerinput = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "main"


def record_worker(config: pytest.Config, target: Any) -> None:
    """This judge process's worker start: its ready report, or why it failed."""
    impl = target.impl
    record = {
        "ready": impl.ready if impl is not None else None,
        "start_error": str(target.start_error) if target.start_error is not None else None,
        "start_fault": str(getattr(target.start_error, "fault", "")) or None,
        "startups": impl.startups if impl is not None else [],
    }
    (_session_dir(config) / f"ready-{_process_tag(config)}.json").write_text(json.dumps(record, default=str))


def record_findings(config: pytest.Config, target: Any) -> None:
    """Compromise findings of this judge process's implementation: lmspec's
    own modules imported (or reached for) by the submission."""
    impl = target.impl
    if impl is None:
        return
    findings = list(impl.findings)
    if impl.channel is not None and impl.channel.alive():
        try:
            modules, attempts = impl.modules()
        except BaseException:  # a worker that no longer answers has nothing to add
            modules, attempts = [], []
        for name, path in modules:
            if _lmspec_file(path, target):
                findings.append(f"the submission imported lmspec's own module {name} ({path})")
        for name in attempts:
            top = name.partition(".")[0]
            own = target.root is not None and ((target.root / top).is_dir() or (target.root / f"{top}.py").is_file())
            allowed = target.spec.allow_reference and (
                name == "lmspec" or name.startswith(("lmspec.reference", "reference"))
            )
            if not own and not allowed:
                findings.append(f"the submission tried to import lmspec's own package {name!r}")
    (_session_dir(config) / f"findings-{_process_tag(config)}.json").write_text(json.dumps(sorted(set(findings))))


def record_startups(config: pytest.Config, target: Any) -> None:
    """Seconds of every worker start of this judge process (restarts included)."""
    if target.impl is not None:
        path = _session_dir(config) / f"startups-{_process_tag(config)}.json"
        path.write_text(json.dumps(target.impl.startups))


def hypothesis_phases(statistics: str) -> dict[str, Any]:
    """Seconds per Hypothesis phase (generate, shrink...) and why it stopped,
    from the statistics Hypothesis' pytest plugin leaves on the item."""
    phases: dict[str, Any] = {name: float(seconds) for name, seconds in _PHASE.findall(statistics)}
    stopped = _STOPPED.search(statistics)
    if stopped:
        phases["stopped"] = stopped.group(1).strip()
    return phases


def note_shrink_budget(message: str, phases: dict[str, Any]) -> str:
    """A failure whose shrinking hit the budget says that its input is not minimal."""
    if "slow" in str(phases.get("stopped", "")):
        return message + "\n(shrinking stopped at its time budget, --shrink-budget: this input may not be the smallest)"
    return message


def record_fixtures(config: pytest.Config) -> None:
    """Which oracle files this judge process used, from where; refused and missing ones."""
    session = getattr(config, "_lmspec_session", None)
    files = session.fixtures if session is not None else None
    if files is not None:
        (_session_dir(config) / f"fixtures-{_process_tag(config)}.json").write_text(json.dumps(files.report()))


def _lmspec_file(path: str, target: Any) -> bool:
    allowed = target.spec.allow_reference
    if path.startswith("/opt/lmspec-base/"):
        return not allowed
    if target.root is not None and path.startswith(str(target.root) + "/"):
        return False
    if path.startswith(_LMSPEC_DIRS):
        return not (allowed and path.startswith(str(ROOT / "reference") + "/"))
    return "/site-packages/lmspec/" in path


# --- one test --------------------------------------------------------------------------
def _leaf(exc: BaseException) -> BaseException:
    """The first real exception: of a group (Hypothesis' distinct failures),
    the first; of Hypothesis' wrapper for a BaseException, what it wraps."""
    while True:
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        elif type(exc).__name__ == "_WrappedBaseException" and exc.__cause__ is not None:
            exc = exc.__cause__
        else:
            return exc


#: How Hypothesis begins its note with the failing example: "Falsifying example" until 6.13x, "Failing test
#: case" (a generated one) or "Failing explicit example" (an @example) since.
_EXAMPLE_NOTES = ("Falsifying", "Failing test case", "Failing explicit example")


def failure_message(exc: BaseException) -> str:
    """The first real failure, with Hypothesis' falsifying example."""
    leaf = _leaf(exc)
    if isinstance(leaf, SubmissionError):
        text = f"{leaf.remote_type}: {leaf}"
    elif isinstance(leaf, OutcomeException):
        text = str(leaf)
    else:
        text = f"{type(leaf).__name__}: {leaf}"
    notes = [n for n in getattr(leaf, "__notes__", []) or [] if isinstance(n, str) and n.startswith(_EXAMPLE_NOTES)]
    if notes:
        text += "\n" + notes[0]
    return text[:MESSAGE_CHARS]


def summary(message: str) -> str:
    """First line, plus the likely cause when the message names one."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0][:400]
    cause = next((line for line in lines[1:] if line.startswith("likely cause")), None)
    return f"{first} ({cause[:300]})" if cause else first


def _skip_message(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ").splitlines()[0]
    return str(report.longrepr).splitlines()[0] if report.longrepr else ""


def classify(report: pytest.TestReport, fault: str | None, message: str) -> Outcome:
    if report.skipped:
        if hasattr(report, "wasxfail"):
            return Outcome.SKIPPED
        if message.startswith("not implemented:"):
            return Outcome.NOT_IMPLEMENTED
        if message.startswith("not provided:"):
            return Outcome.NOT_PROVIDED
        if message.startswith(NOT_CHECKED_PREFIX):
            return Outcome.NOT_CHECKED
        return Outcome.SKIPPED
    if report.passed:
        return Outcome.PASSED
    if fault:
        return Fault(fault).outcome
    if "Timeout" in message[:80] and "pytest-timeout" in message:
        return Outcome.TIMEOUT
    return Outcome.FAILED if report.when == "call" else Outcome.ERROR


class _Hooks:
    def __init__(self, config: pytest.Config):
        self.config = config
        self._setup_s: dict[str, float] = {}
        path = config.getoption("lmspec_progress")
        self.progress = open(path, "a", buffering=1) if path and not hasattr(config, "workerinput") else None  # noqa: SIM115

    def _progress(self, event: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress.write(json.dumps(event, default=str) + "\n")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(self.config, "workerinput") and session.items:
            self.config._lmspec_stamps.setdefault("collected", time.time())  # type: ignore[attr-defined]
            self.config._lmspec_order = [i.nodeid for i in session.items]  # type: ignore[attr-defined]
            self._progress({"collected": len(session.items)})

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not getattr(self, "_announced", False):
            self._announced = True
            self.config._lmspec_stamps.setdefault("collected", time.time())  # type: ignore[attr-defined]
            self.config._lmspec_order = list(ids)  # type: ignore[attr-defined]
            self._progress({"collected": len(ids)})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module of the suite that fails to collect (under xdist the run goes on without its
        tests): kept, so that the grader never scores what is left as if the suite were whole."""
        if report.failed and not hasattr(self.config, "workerinput"):
            last = str(report.longrepr).strip().splitlines()[-1:] or [""]
            errors = self.config.__dict__.setdefault("_lmspec_collection_errors", [])
            errors.append(f"{report.nodeid}: {last[0][:300]}")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.excinfo is not None and not report.skipped:
            exc = _leaf(call.excinfo.value)
            fault = getattr(exc, "fault", None)
            if fault is not None:
                report.user_properties.append(("fault", str(fault)))
            report.user_properties.append(("message", failure_message(call.excinfo.value)))
        statistics = getattr(item, "hypothesis_statistics", None)
        if call.when == "teardown" and isinstance(statistics, str):
            report.user_properties.append(("hypothesis", hypothesis_phases(statistics)))
        target = getattr(item.config, "_lmspec_session", None)
        mark = getattr(item, "_lmspec_output_mark", None)
        if call.when == "teardown" and mark is not None and target is not None and target.impl is not None:
            channel = target.impl.channel
            if channel is not None:
                report.user_properties.append(("output_bytes", max(0, channel.output.total - mark)))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and report.outcome == "passed":
            props = dict(report.user_properties)
            record = self.config._lmspec_results.get(report.nodeid)  # type: ignore[attr-defined]
            if record is None:  # setup: its time joins the test's record
                self._setup_s[report.nodeid] = report.duration
                return
            for key in ("output_bytes", "hypothesis"):
                if key in props:
                    record["props"][key] = props[key]
            if "hypothesis" in props and record["outcome"] != Outcome.PASSED:
                record["message"] = note_shrink_budget(record["message"], props["hypothesis"])
            record["duration_s"] = round(record["duration_s"] + report.duration, 4)
            return
        props = dict(report.user_properties)
        if report.skipped:
            message = _skip_message(report)
            if hasattr(report, "wasxfail"):
                message = f"xfail: {message or report.wasxfail}"
        else:
            message = str(props.get("message") or "")
            if not message and report.longrepr:
                message = str(getattr(report.longrepr, "reprcrash", None) and report.longrepr.reprcrash.message)
        outcome = classify(report, props.get("fault"), message)
        results = self.config._lmspec_results  # type: ignore[attr-defined]
        earlier = results.get(report.nodeid)
        if earlier is not None and earlier["outcome"] != Outcome.PASSED:
            return  # the first failure of a test is its result
        if outcome is Outcome.ERROR and report.when != "call" and not props.get("fault"):
            message = f"{message} (in {report.when})"
        record = {
            "nodeid": report.nodeid,
            "spec": props.get("spec"),
            "strength": props.get("strength"),
            "when": report.when,
            "outcome": str(outcome),
            "message": message,
            "summary": summary(message),
            "duration_s": round(report.duration + self._setup_s.pop(report.nodeid, 0.0), 4),
            "props": {k: v for k, v in props.items() if k not in ("spec", "strength", "message")},
        }
        results[report.nodeid] = record  # a failed teardown after a passed call replaces it
        self.config._lmspec_stamps.setdefault("first_result", time.time())  # type: ignore[attr-defined]
        self._progress({"nodeid": report.nodeid, "outcome": record["outcome"], "record": record})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = session.config
        target = getattr(config, "_lmspec_session", None)
        if target is not None and target.impl is not None:
            record_findings(config, target)
            record_startups(config, target)
        record_fixtures(config)
        path = config.getoption("lmspec_report")
        if self.progress is not None:
            self.progress.close()
        if not path or hasattr(config, "workerinput"):
            return
        write(config, Path(path), int(exitstatus))


def _read_all(folder: Path, prefix: str) -> list[Any]:
    out = []
    for path in sorted(folder.glob(f"{prefix}-*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


def in_suite_order(config: pytest.Config) -> list[dict[str, Any]]:
    """The test records in the suite's (collection) order, whatever order
    the judge's processes finished them in: what an item's explanation is
    chosen from does not depend on scheduling."""
    records = list(config._lmspec_results.values())  # type: ignore[attr-defined]
    order = {nodeid: i for i, nodeid in enumerate(getattr(config, "_lmspec_order", None) or [])}
    return sorted(records, key=lambda r: order.get(r["nodeid"], len(order)))


def write(config: pytest.Config, path: Path, exitstatus: int) -> None:
    target = config._lmspec_session  # type: ignore[attr-defined]
    folder = _session_dir(config)
    readies = _read_all(folder, "ready")
    ready = next((r["ready"] for r in readies if r.get("ready")), None) or {}
    start_error = next((r["start_error"] for r in readies if r.get("start_error")), None)
    findings = sorted({f for batch in _read_all(folder, "findings") for f in batch})
    faults_file = folder / "faults.jsonl"
    faults = [json.loads(x) for x in faults_file.read_text().splitlines() if x.strip()] if faults_file.exists() else []
    functions = set(ready.get("functions") or [])
    fixtures: dict[str, Any] = {"used": {}, "refused": [], "missing": []}
    for part in _read_all(folder, "fixtures"):
        fixtures["used"].update(part.get("used") or {})
        fixtures["refused"] += [r for r in part.get("refused") or [] if r not in fixtures["refused"]]
        fixtures["missing"] += [m for m in part.get("missing") or [] if m not in fixtures["missing"]]
    payload: dict[str, Any] = {
        "schema": SCHEMA,
        "adapter": target.target.given,
        "target": target.target.to_json(),
        "profile": target.profile.name,
        "root": str(target.root) if target.root else None,
        # where the adapter lies on this machine, not inside the sandbox (which shows lmspec's reference elsewhere)
        "origin": Paths.host(str(ready["origin"])) if ready.get("origin") else None,
        "is_reference": target.target.is_reference,
        "sandbox": str(target.spec.sandbox),
        "in_process": target.in_process,
        "warnings": target.warnings,
        "worker": {k: ready.get(k) for k in ("python", "executable", "torch", "cuda", "metadata")},
        "import_error": ready.get("error"),
        "intake": ready.get("intake"),
        "start_error": start_error,
        "compromised": findings,
        "fixtures": fixtures,
        "faults": faults,
        "missing_core": [n for n in target.profile.core_functions if not ready or n not in functions],
        "missing_extended": [n for n in target.profile.extended_functions if not ready or n not in functions],
        "exitstatus": exitstatus,
        "collection_errors": getattr(config, "_lmspec_collection_errors", []),
        "stamps": {**config._lmspec_stamps, "finished": time.time()},  # type: ignore[attr-defined]
        "worker_startups": [x for batch in _read_all(folder, "startups") for x in batch],
        "duration_s": round(time.time() - config._lmspec_started, 3),  # type: ignore[attr-defined]
        "python": sys.version.split()[0],
        "tests": in_suite_order(config),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str))
