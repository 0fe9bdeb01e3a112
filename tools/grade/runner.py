"""Run the conformance suite on an implementation in resource-limited child
processes, and survive whatever the implementation does.

One *attempt* is one ``pytest`` child (optionally with xdist workers) started
through a tiny launcher that lowers its resource limits (address space, CPU
time, file size, no core files) and then ``exec``s pytest in a new process
group. The child loads ``tools.grade.stream``, which appends a JSON line per
test event to a stream file; the grader tails it while the child runs, so it
always knows which test each process is running.

Three deadlines protect each test: pytest-timeout (signal method) at T; the
stream plugin's own deadline at T + a little, which raises a BaseException
that Hypothesis cannot swallow; and the grader, which SIGKILLs the process
running a test that is still unfinished at T + grace. When a process dies
(segfault, ``os._exit``, a kill), the tests it was running are recorded as
crashed or timed out with the reason, and a new attempt runs the tests not
yet finished. An overall deadline kills the whole process group.
"""

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.grade.child import REPO, AttemptState, Child, Limits, death_detail, fault_detail

__all__ = [
    "Limits",
    "Progress",
    "SuiteRun",
    "TestOutcome",
    "classify",
    "resolve_adapter",
    "run_suite",
]

DEFAULT_SUITE = (str(REPO / "conformance"),)
NULL_ADAPTER = "tools.grade._null_adapter"

# Outcomes of one test, as the grader reports them.
PASSED, FAILED, ERROR, TIMEOUT = "passed", "failed", "error", "timeout"
SKIPPED, NOT_IMPLEMENTED, NOT_PROVIDED = "skipped", "not_implemented", "not_provided"

_MEMORY_MARKERS = (
    "can't allocate memory",
    "Cannot allocate memory",
    "MemoryError",
    "Unable to allocate",
)
_FILE_SIZE_MARKERS = ("File too large", "[Errno 27]")


@dataclass
class TestOutcome:
    __test__ = False  # not a pytest test class

    nodeid: str
    spec: str | None
    outcome: str
    message: str = ""
    duration_s: float = 0.0
    output_bytes: int = 0
    props: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "message": self.message,
            "duration_s": round(self.duration_s, 3),
        }


@dataclass
class Attempt:
    number: int
    returncode: int | None
    ended: str  # "finished", "crashed", "overall timeout", ...
    tests_run: int
    seconds: float
    log: str
    jobs: int


@dataclass
class SuiteRun:
    tests: dict[str, TestOutcome]  # collection order
    attempts: list[Attempt]
    adapter: dict[str, Any]
    environment: dict[str, Any]
    import_tampering: list[str]
    anomalies: list[str]
    error: str | None  # a run-level problem (the implementation could not be loaded...)
    duration_s: float


@dataclass
class Progress:
    done: int
    total: int | None
    nodeid: str | None = None
    outcome: str | None = None
    failures: int = 0


ProgressFn = Callable[[Progress], None]


# --- classifying one test from its phase reports ----------------------------------
def _is_timeout(message: str) -> bool:
    return "Timeout" in message[:80] and ("pytest-timeout" in message or "grader deadline" in message)


def _skip_kind(message: str) -> str:
    if message.startswith("not implemented:"):
        return NOT_IMPLEMENTED
    if message.startswith("not provided:"):
        return NOT_PROVIDED
    return SKIPPED


def classify(nodeid: str, spec: str | None, reports: list[dict[str, Any]], limits: Limits) -> TestOutcome:
    phases: dict[str, dict[str, Any]] = {}
    props: dict[str, Any] = {}
    duration = 0.0
    output = 0
    for r in reports:
        phases[str(r.get("when"))] = r
        duration += float(r.get("duration") or 0)
        output = max(output, int(r.get("output_bytes") or 0))  # sections accumulate per phase
        if isinstance(r.get("props"), dict):
            props.update(r["props"])
    outcome, message = ERROR, "no result was recorded for this test"
    for when in ("setup", "call", "teardown"):
        r = phases.get(when)
        if r is None:
            continue
        msg = str(r.get("message") or "").removeprefix("tools.grade.stream.GradeTimeout: ")
        if r.get("outcome") == "failed":
            refused = msg.startswith("tampering detected")  # failed by the integrity guard
            outcome = TIMEOUT if _is_timeout(msg) else (FAILED if when == "call" or refused else ERROR)
            message = msg if when == "call" or refused else f"{msg} (in {when})"
            break
        if r.get("outcome") == "skipped":
            outcome, message = (SKIPPED, f"xfail: {msg}") if r.get("wasxfail") else (_skip_kind(msg), msg)
            break
        if when == "call":
            outcome, message = PASSED, ""
    else:
        if "call" not in phases and "setup" in phases:
            outcome, message = ERROR, "the test did not run past setup"
    if outcome in (FAILED, ERROR) and any(m in message for m in _MEMORY_MARKERS) and limits.memory_gb:
        message = f"memory limit exceeded (--memory-limit {limits.memory_gb:g} GB): {message}"
    elif outcome in (FAILED, ERROR) and any(m in message for m in _FILE_SIZE_MARKERS):
        message = f"file size limit exceeded (512 MB a file, captured output included): {message}"
    return TestOutcome(nodeid, spec, outcome, message[:500], duration, output, props)


# --- the attempt loop --------------------------------------------------------------------
def run_suite(
    adapter: str,
    *,
    workdir: Path,
    suite: tuple[str, ...] = DEFAULT_SUITE,
    spec: str | None = None,
    limits: Limits | None = None,
    profile: str = "ci",
    device: str = "cpu",
    progress: ProgressFn | None = None,
) -> SuiteRun:
    """Run the suite on ``adapter`` until every collected test has a result."""
    limits = limits or Limits()
    run = _Run(
        resolve_adapter(adapter),
        workdir.resolve(),
        tuple(str(Path(p).resolve()) for p in suite),
        spec,
        limits,
        profile,
        device,
        progress,
    )
    return run.loop()


class _Run:
    """The attempt loop of one grading: start a child for the tests without a
    result, settle what it left unfinished, repeat."""

    def __init__(self, adapter, workdir, suite, spec, limits, profile, device, progress):
        self.adapter, self.workdir, self.suite, self.spec = adapter, workdir, suite, spec
        self.limits, self.profile, self.device, self.progress = limits, profile, device, progress
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.start = time.monotonic()
        self.deadline = self.start + limits.total_s
        self.order: list[str] = []
        self.spec_of: dict[str, str | None] = {}
        self.results: dict[str, TestOutcome] = {}
        self.attempts: list[Attempt] = []
        self.anomalies: list[str] = []
        self.info: dict[str, Any] = {"adapter": {}, "environment": {}, "tampering": []}
        self.error: str | None = None
        self.jobs = limits.jobs
        self.failures = 0

    def on_event(self, state: AttemptState, done: str | None) -> None:
        if not self.order and state.collected is not None:
            self.order.extend(t[0] for t in state.collected)
            self.spec_of.update({t[0]: t[1] for t in state.collected})
        if done is not None and self.progress is not None:
            reports = state.reports.get(done, [])
            outcome = classify(done, self.spec_of.get(done), reports, self.limits).outcome
            self.failures += outcome in (FAILED, ERROR, TIMEOUT)
            done_now = len(self.results) + len(state.finished)
            self.progress(Progress(done_now, len(self.order) or None, done, outcome, self.failures))

    def set(self, nodeid: str, outcome: str, message: str) -> None:
        self.results[nodeid] = TestOutcome(nodeid, self.spec_of.get(nodeid), outcome, message)

    def loop(self) -> SuiteRun:
        remaining: list[str] | None = None
        stalls = 0
        total = f"the overall time limit (--timeout {self.limits.total_s:g} s)"
        for number in range(1, 10_000):
            child = Child(
                adapter=self.adapter,
                paths=_paths_for(remaining, self.suite),
                spec=self.spec,
                only=remaining,
                limits=self.limits,
                jobs=self.jobs,
                profile=self.profile,
                device=self.device,
                workdir=self.workdir,
                number=number,
            )
            state, returncode, ended, seconds = child.run(self.deadline, self.on_event)
            before = len(self.results)
            self.settle(number, child, state, returncode, ended)
            self.attempts.append(
                Attempt(
                    number,
                    returncode,
                    ended,
                    len(self.results) - before,
                    round(seconds, 2),
                    str(child.log),
                    self.jobs,
                )
            )
            if not self.order:  # died or hung before collecting
                if self.jobs > 1 and ended != "overall timeout":
                    self.jobs = 1  # once more in one process, for a clear exit status
                    continue
                self.not_loaded(ended, returncode)
                break
            remaining = [n for n in self.order if n not in self.results]
            if not remaining:
                break
            if ended == "overall timeout" or time.monotonic() > self.deadline:
                for nodeid in remaining:
                    self.set(nodeid, TIMEOUT, f"Timeout: not run, {total} ran out")
                break
            stalls = stalls + 1 if len(self.results) == before else 0
            if stalls >= 2:
                why = f"{ended}, {death_detail(returncode)}"
                for nodeid in remaining:
                    self.set(
                        nodeid,
                        ERROR,
                        f"not run: the test process stopped twice before this test ({why})",
                    )
                break
        return SuiteRun(
            tests={n: self.results[n] for n in self.order if n in self.results},
            attempts=self.attempts,
            adapter=self.info["adapter"],
            environment=self.info["environment"],
            import_tampering=self.info["tampering"],
            anomalies=self.anomalies,
            error=self.error,
            duration_s=round(time.monotonic() - self.start, 2),
        )

    def settle(self, number: int, child: Child, state: AttemptState, returncode: int | None, ended: str) -> None:
        """Results of one attempt: finished tests from their reports; started
        but unfinished ones as timeouts (killed) or crashes (the process died)."""
        if child.bad_lines:
            self.anomalies.append(f"attempt {number}: {child.bad_lines} unreadable lines in the result stream")
        if state.unknown_ids:
            self.anomalies.append(f"attempt {number}: {state.unknown_ids} results for tests never collected")
        if state.collected is not None and not self.info["adapter"]:
            self.info.update(adapter=state.adapter, environment=state.environment, tampering=state.tampering)
        for nodeid in state.finished:
            if nodeid not in self.results and nodeid in self.spec_of:
                self.results[nodeid] = classify(nodeid, self.spec_of[nodeid], state.reports[nodeid], self.limits)
        for nodeid, pid in state.started.items():
            if nodeid in self.results or nodeid not in self.spec_of:
                continue
            if nodeid in state.killed:
                self.set(nodeid, TIMEOUT, state.killed[nodeid])
            elif ended == "overall timeout":
                limit = f"--timeout {self.limits.total_s:g} s"
                self.set(
                    nodeid,
                    TIMEOUT,
                    f"Timeout: the overall time limit ({limit}) ran out during this test",
                )
            else:
                called = state.exits.get(pid)
                detail = (
                    fault_detail(self.workdir, pid)
                    or (f"the code under test called os._exit({called})" if called is not None else None)
                    or (
                        death_detail(returncode)
                        if self.jobs == 1
                        else "the worker process died (a fatal signal, os._exit, or a kill)"
                    )
                )
                self.set(nodeid, ERROR, f"crashed: the test process died during this test: {detail}")

    def not_loaded(self, ended: str, returncode: int | None) -> None:
        """The child never got to collect: every test is an error (or timeout)
        naming why; the test list comes from a run with an empty adapter."""
        if ended == "startup timeout":
            reason = f"importing it did not finish within {self.limits.startup_s:g} s"
        elif ended == "overall timeout":
            reason = f"--timeout {self.limits.total_s:g} s ran out while importing it"
        else:
            reason = f"the test process died while importing it: {death_detail(returncode)}"
        self.error = f"the implementation could not be loaded: {reason}"
        outcome = TIMEOUT if "time" in ended else ERROR
        tests = _collect_with_null_adapter(self.workdir, self.suite, self.spec, self.limits, self.profile, self.device)
        for nodeid, sid in tests:
            self.order.append(nodeid)
            self.spec_of[nodeid] = sid
            self.set(nodeid, outcome, self.error)


def resolve_adapter(adapter: str) -> str:
    """An existing file path made absolute (the children run in their own
    folder); an import name unchanged."""
    path = Path(adapter).expanduser()
    if adapter.endswith(".py") or os.sep in adapter or path.exists():
        return str(path.resolve())
    return adapter


def _paths_for(remaining: list[str] | None, suite: tuple[str, ...]) -> list[str]:
    """Only the files that hold the remaining tests (faster re-collection)."""
    if remaining is None:
        return list(suite)
    files = sorted({str(REPO / n.split("::", 1)[0]) for n in remaining})
    return files or list(suite)


def _collect_with_null_adapter(
    workdir: Path,
    suite: tuple[str, ...],
    spec: str | None,
    limits: Limits,
    profile: str,
    device: str,
) -> list[tuple[str, str | None]]:
    """The test list, collected with an empty adapter (used when the real one
    kills the process before collection)."""
    child = Child(
        adapter=NULL_ADAPTER,
        paths=list(suite),
        spec=spec,
        only=None,
        limits=limits,
        jobs=1,
        profile=profile,
        device=device,
        workdir=workdir,
        number=0,
        collect_only=True,
    )
    state, _, _, _ = child.run(time.monotonic() + limits.startup_s + 30, lambda s, d: None)
    return [(t[0], t[1]) for t in state.collected or []]
