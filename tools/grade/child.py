"""One grading child: a ``pytest`` process (optionally with xdist workers)
started through a tiny launcher that lowers its resource limits and then
``exec``s pytest in a new process group, watched through the JSON-lines
stream that ``tools.grade.stream`` writes inside it. The watcher kills the
process whose test outlives its deadline, the whole group when the overall
time runs out, when import/collection hangs, or when the run stalls.
"""

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

_SIGNAL_NAMES = {
    signal.SIGSEGV: "segmentation fault (SIGSEGV)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGBUS: "bus error (SIGBUS)",
    signal.SIGFPE: "floating-point exception (SIGFPE)",
    signal.SIGILL: "illegal instruction (SIGILL)",
    signal.SIGKILL: "killed (SIGKILL: out of memory, or killed from outside)",
    signal.SIGXCPU: "CPU time limit exceeded (SIGXCPU)",
    signal.SIGTERM: "terminated (SIGTERM)",
}

# Launcher: lower the resource limits, then become pytest. Runs as `python -c`
# so no module of ours is imported before the limits apply, and without
# subprocess's preexec_fn (unsafe when the grader runs threads, as --batch does).
_LAUNCH = """
import json, os, resource, sys
for name, soft, hard in json.loads(sys.argv[1]):
    resource.setrlimit(getattr(resource, name), (soft, hard))
os.execv(sys.argv[2], sys.argv[2:])
"""


@dataclass
class Limits:
    """Resource limits for the grading children (seconds, GB)."""

    per_test_s: float = 60.0
    total_s: float = 1800.0
    memory_gb: float | None = 4.0
    jobs: int = 1
    threads: int = 1  # torch/OpenMP threads per process
    startup_s: float = 120.0  # import + collection of one attempt
    output_cap_bytes: int = 2_000_000  # per attempt log (head + tail kept)

    @property
    def deadline_s(self) -> float:
        """The stream plugin's own deadline (second layer)."""
        return self.per_test_s + max(1.0, 0.1 * self.per_test_s)

    @property
    def kill_after_s(self) -> float:
        """When the grader kills a process whose test has not finished."""
        return self.per_test_s + max(5.0, 0.5 * self.per_test_s)

    def rlimits(self, cuda: bool) -> list[tuple[str, int, int]]:
        import resource

        out = [("RLIMIT_CORE", 0, 0), ("RLIMIT_FSIZE", 512 << 20, 512 << 20)]
        if self.memory_gb and not cuda:  # CUDA reserves huge virtual ranges
            size = int(self.memory_gb * (1 << 30))
            out.append(("RLIMIT_AS", size, size))
        cpu = int(self.total_s * max(1, self.threads) + 60)
        out.append(("RLIMIT_CPU", cpu, cpu + 30))
        hard_of = {n: resource.getrlimit(getattr(resource, n))[1] for n, _, _ in out}
        # never ask for more than the grader itself is allowed
        return [
            (
                n,
                s if h == resource.RLIM_INFINITY else min(s, h),
                hd if h == resource.RLIM_INFINITY else min(hd, h),
            )
            for (n, s, hd), h in ((o, hard_of[o[0]]) for o in out)
        ]


# --- reading the stream ------------------------------------------------------------
class _StreamReader:
    def __init__(self, path: Path):
        self.path = path
        self.pos = 0
        self.buf = b""
        self.bad_lines = 0

    def poll(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        events = []
        for line in lines:
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                self.bad_lines += 1
                continue
            if isinstance(ev, dict):
                events.append(ev)
            else:
                self.bad_lines += 1
        return events


@dataclass
class AttemptState:
    collected: list[list[Any]] | None = None
    adapter: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    tampering: list[str] = field(default_factory=list)
    reports: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: collections.defaultdict(list))
    running: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid -> (nodeid, seen at)
    started: dict[str, int] = field(default_factory=dict)  # nodeid -> pid
    finished: list[str] = field(default_factory=list)
    killed: dict[str, str] = field(default_factory=dict)  # nodeid -> why
    dead: dict[str, int] = field(default_factory=dict)  # nodeid -> pid of a worker that died
    exits: dict[int, int] = field(default_factory=dict)  # pid -> status it passed to os._exit
    configures: int = 0
    session_done: bool = False
    last_event: float = field(default_factory=time.monotonic)
    unknown_ids: int = 0
    known: set[str] | None = None

    def apply(self, ev: dict[str, Any], now: float) -> str | None:
        """Update from one event; returns a nodeid that just finished."""
        self.last_event = now
        kind, pid, nodeid = ev.get("ev"), ev.get("pid"), ev.get("nodeid")
        known = self.known
        if nodeid is not None and known is not None and nodeid not in known:
            self.unknown_ids += 1
            return None
        if kind == "configure":
            self.configures += 1
        elif kind == "collected" and self.collected is None:
            self.collected = [t for t in ev.get("tests", []) if isinstance(t, list) and len(t) == 2]
            self.known = {t[0] for t in self.collected}
            self.adapter = ev.get("adapter") or {}
            self.environment = ev.get("environment") or {}
            self.tampering = [str(x) for x in ev.get("tampering") or []]
        elif kind == "start" and isinstance(nodeid, str):
            self.running[pid] = (nodeid, now)
            self.started[nodeid] = pid
        elif kind == "report" and isinstance(nodeid, str):
            self.reports[nodeid].append(ev)
        elif kind == "finish" and isinstance(nodeid, str):
            if self.running.get(pid, ("",))[0] == nodeid:
                del self.running[pid]
            if nodeid not in self.finished:
                self.finished.append(nodeid)
                return nodeid
        elif kind == "exit" and isinstance(pid, int):
            self.exits[pid] = ev.get("status")
        elif kind == "sessionfinish" and ev.get("role") in ("main", "controller"):
            self.session_done = True
        return None


# --- one child process ---------------------------------------------------------------
def _drain(fd: int, path: Path, cap: int) -> None:
    """Copy the child's output to ``path``, keeping the first ``cap`` bytes and
    the last 64 KB; the rest is counted, not stored."""
    tail: collections.deque[bytes] = collections.deque()
    tail_len = total = 0
    with open(path, "wb") as out:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            total += len(chunk)
            room = cap - out.tell() if out.tell() < cap else 0
            if room > 0:
                out.write(chunk[:room])
                chunk = chunk[room:]
            if chunk:
                tail.append(chunk)
                tail_len += len(chunk)
                while tail_len - len(tail[0]) > 65536:
                    tail_len -= len(tail.popleft())
        if total > cap:
            kept_tail = b"".join(tail)[-65536:]
            omitted = total - cap - len(kept_tail)
            if omitted > 0:
                out.write(f"\n[... {omitted} bytes of output omitted by the grader ...]\n".encode())
            out.write(kept_tail)
    os.close(fd)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def fault_detail(stream_dir: Path, pid: int | None) -> str | None:
    if pid is None:
        return None
    path = stream_dir / f"fault-{pid}.log"
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Fatal Python error:"):
            return line.removeprefix("Fatal Python error:").strip()
    return None


def _alive(pid: int) -> bool:
    """False once ``pid`` has exited (zombies included)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def death_detail(returncode: int | None) -> str:
    if returncode is None:
        return "the process did not exit"
    if returncode < 0:
        sig = -returncode
        try:
            name = _SIGNAL_NAMES.get(signal.Signals(sig), signal.Signals(sig).name)
        except ValueError:
            name = f"signal {sig}"
        return name
    return f"exited with status {returncode} (os._exit, or an exit that reached pytest itself)"


class Child:
    """One pytest child: start, watch, kill when needed."""

    def __init__(
        self,
        *,
        adapter: str,
        paths: list[str],
        spec: str | None,
        only: list[str] | None,
        limits: Limits,
        jobs: int,
        profile: str,
        device: str,
        workdir: Path,
        number: int,
        collect_only: bool = False,
    ):
        self.adapter, self.paths, self.spec, self.only = adapter, paths, spec, only
        self.limits, self.jobs, self.profile, self.device = limits, jobs, profile, device
        self.workdir, self.number, self.collect_only = workdir, number, collect_only
        tag = f"attempt-{number}" if not collect_only else "collect"
        self.stream = workdir / f"{tag}.jsonl"
        self.log = workdir / f"{tag}.log"
        self.report = workdir / f"{tag}.report.json"
        self.bad_lines = 0

    def command(self) -> list[str]:
        # Only the plugins the grading needs: PYTEST_DISABLE_PLUGIN_AUTOLOAD keeps
        # out whatever else is installed (pytest-randomly, coverage...).
        plugins = (
            "tools.grade.stream",
            "xdist.plugin",
            "pytest_timeout",
            "_hypothesis_pytestplugin",
            "no:cacheprovider",
            "no:faulthandler",  # the stream plugin sends fatal-signal dumps to its own file
        )
        options = {
            "--lmspec-stream": str(self.stream),
            "--lmspec-report": str(self.report),
            "--adapter": self.adapter,
            "--rootdir": str(REPO),
            "--timeout": f"{self.limits.per_test_s:g}",
            "--timeout-method": "signal",
            "--lmspec-deadline": f"{self.limits.deadline_s:g}",
            "--hypothesis-profile": self.profile,
            "--device": self.device,
        }
        args = [*self.paths, "-q", "--tb=short", "--show-capture=no"]
        for plugin in plugins:
            args += ["-p", plugin]
        for option, value in options.items():
            args += [option, value]
        if self.spec:
            args += ["--spec", self.spec]
        if self.only is not None:
            only_file = self.workdir / f"attempt-{self.number}.only"
            only_file.write_text("\n".join(self.only) + "\n")
            args += ["--lmspec-only", str(only_file)]
        if self.collect_only:
            args += ["--collect-only"]
        elif self.jobs > 1:
            args += ["-n", str(self.jobs), "--max-worker-restart", str(4 * self.jobs + 4)]
        rlimits = self.limits.rlimits(cuda=self.device in ("cuda", "all", "auto"))
        return [
            sys.executable,
            "-c",
            _LAUNCH,
            json.dumps(rlimits),
            sys.executable,
            "-m",
            "pytest",
            *args,
        ]

    def environment(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "LMSPEC_ADAPTER", "COV_", "PYTHONSTARTUP", "PYTHONINSPECT"))
        }
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONHASHSEED"] = "0"
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no stray plugins (randomly, cov...)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(self.limits.threads)
        return env

    def run(
        self, deadline: float, on_event: Callable[[AttemptState, str | None], None]
    ) -> tuple[AttemptState, int | None, str, float]:
        """Run to completion or a limit: (state, returncode, how it ended, seconds)."""
        cwd = self.workdir / "cwd"
        cwd.mkdir(exist_ok=True)
        for stale in (self.stream, self.report):
            stale.unlink(missing_ok=True)
        state = AttemptState()
        reader = _StreamReader(self.stream)
        t0 = time.monotonic()
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(
                self.command(),
                cwd=cwd,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        drain = threading.Thread(target=_drain, args=(read_fd, self.log, self.limits.output_cap_bytes), daemon=True)
        drain.start()
        ended = "finished"
        session_done_at: float | None = None
        limits = self.limits
        idle_limit = max(limits.startup_s, limits.kill_after_s + 10)
        try:
            while True:
                returncode = proc.poll()
                now = time.monotonic()
                for ev in reader.poll():
                    done = state.apply(ev, now)
                    on_event(state, done)
                if returncode is not None:
                    break
                if state.session_done and session_done_at is None:
                    session_done_at = now
                for pid, (nodeid, seen) in list(state.running.items()):
                    if pid != proc.pid and not _alive(pid):  # an xdist worker died mid-test
                        del state.running[pid]
                        state.dead[nodeid] = pid
                    elif now - seen > limits.kill_after_s and nodeid not in state.killed:
                        state.killed[nodeid] = (
                            f"Timeout: no result after {now - seen:.0f} s; the grader killed "
                            f"the test process (per-test limit {limits.per_test_s:g} s)"
                        )
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGKILL)
                if now > deadline:
                    ended = "overall timeout"
                elif state.collected is None and now - t0 > limits.startup_s:
                    ended = "startup timeout"
                elif state.collected is not None and not state.running and now - state.last_event > idle_limit:
                    ended = "stalled"
                elif session_done_at is not None and now - session_done_at > 15:
                    ended = "finished"  # lingering threads or children after the session
                else:
                    time.sleep(0.1)
                    continue
                _kill_group(proc)
                proc.wait()
                returncode = proc.returncode
                break
        finally:
            _kill_group(proc)  # stray grandchildren (worker pools the submission left behind)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            drain.join(timeout=10)
        now = time.monotonic()
        for ev in reader.poll():
            done = state.apply(ev, now)
            on_event(state, done)
        self.bad_lines = reader.bad_lines
        if ended == "finished" and returncode not in (0, 1, 5) and not state.session_done:
            ended = "crashed"
        return state, returncode, ended, now - t0
