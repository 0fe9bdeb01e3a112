"""The judge's end of the pipe to one worker: start it (sandboxed or not),
exchange frames with a deadline, capture its output, kill it.

``ProcessChannel`` runs the worker as a process of its own (the normal
mode). ``InProcessChannel`` runs the very same server code inside the judge
(``--in-process``: for debugging an implementation with pdb; NOT for
grading, since the implementation then shares the judge's process).
"""

import collections
import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lmspec import ROOT
from lmspec.conformance.judge import sandbox
from lmspec.conformance.judge.sandbox import Sandbox, WorkerSpec
from lmspec.conformance.judge.worker import frames

#: Bytes of the worker's own output kept (the first, then the last).
OUTPUT_HEAD = 64 << 10
OUTPUT_TAIL = 64 << 10


class ChannelClosed(Exception):
    """The worker is gone (it died, or was killed)."""


class ChannelTimeout(Exception):
    """No frame before the deadline."""


class _Output:
    """The worker's stdout+stderr: counted, the head and tail kept."""

    def __init__(self) -> None:
        self.total = 0
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self._tail_len = 0
        self.lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self.lock:
            self.total += len(chunk)
            room = OUTPUT_HEAD - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail.append(chunk)
                self._tail_len += len(chunk)
                while self._tail_len - len(self.tail[0]) > OUTPUT_TAIL:
                    self._tail_len -= len(self.tail.popleft())

    def text_since(self, mark: int) -> str:
        """What was printed after ``total`` was ``mark`` (as much as was kept)."""
        with self.lock:
            tail = b"".join(self.tail)
            new = self.total - mark
            data = (bytes(self.head) + tail)[-new:] if new > 0 else b""
        return data.decode("utf-8", "replace")


def _drain(fd: int, sink: _Output) -> None:
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        sink.add(chunk)
    os.close(fd)


def _set_limits(limits: list[tuple[int, int, int]]) -> Callable[[], None]:
    def apply() -> None:
        import ctypes
        import resource

        for res, soft, hard in limits:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(res, (soft, hard))
        # die with the judge even without bubblewrap (PR_SET_PDEATHSIG = 1)
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)

    return apply


class ProcessChannel:
    def __init__(self, spec: WorkerSpec, startup_timeout: float):
        self.started_at = time.monotonic()
        self.spec = spec
        self.output = _Output()
        self.scratch = sandbox.make_scratch()
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        out_r, out_w = os.pipe()
        info_r, info_w = os.pipe()
        worker_args = ["--fd-in", str(to_worker_r), "--fd-out", str(from_worker_w)]
        if spec.sandbox is Sandbox.BWRAP:
            worker_args += spec.worker_args(data_dir=sandbox.SANDBOX_DATA_DIR)
            cmd = sandbox.bwrap_command(spec, worker_args, info_w)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            worker_args += spec.worker_args()
            cmd = sandbox.unsandboxed_command(spec, worker_args, self.scratch)
            env = sandbox.environment(spec, str(self.scratch / "home"))
        keep = [to_worker_r, from_worker_w, info_w]
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=out_w,
                pass_fds=keep,
                env=env,
                cwd=self.scratch,
                start_new_session=True,
                preexec_fn=_set_limits(sandbox.rlimits(spec)),
            )
        finally:
            for fd in (*keep, out_w):
                os.close(fd)
        self._info_fd = info_r
        self._drain = threading.Thread(target=_drain, args=(out_r, self.output), daemon=True)
        self._drain.start()
        self.host_pid: int | None = None
        self.startup_timeout = startup_timeout
        self._killed = False

    # --- frames ---------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        try:
            frames.write_frame(self._to_worker, data)
        except (BrokenPipeError, OSError) as exc:
            raise ChannelClosed(str(exc)) from exc

    def receive(self, deadline: float) -> bytes | bytearray:
        header = self._read(4, deadline)
        (n,) = frames.LENGTH.unpack(header)
        if n > frames.MAX_FRAME:
            raise frames.ProtocolError(f"announced message of {n} bytes exceeds the limit")
        return self._read(n, deadline)

    def _read(self, n: int, deadline: float) -> bytearray:
        """``n`` bytes, read into one buffer (a frame is never held twice)."""
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        while got < n:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise ChannelTimeout()
            ready, _, _ = select.select([self._from_worker], [], [], min(wait, 1.0))
            if not ready:
                continue
            count = os.readv(self._from_worker, [view[got : got + min(n - got, 1 << 20)]])
            if not count:
                raise ChannelClosed("the worker closed its end")
            got += count
        return buffer

    # --- the process ------------------------------------------------------------------
    def find_host_pid(self, worker_pid: int) -> None:
        """The worker's pid as this judge sees it (for /proc measurements)."""
        if self.spec.sandbox is not Sandbox.BWRAP:
            self.host_pid = self.proc.pid
            return
        try:
            info = json.loads(os.read(self._info_fd, 1 << 16) or b"{}")
        except (OSError, ValueError):
            return
        init = info.get("child-pid")
        if not isinstance(init, int):
            return
        for pid in _children(init):
            if _ns_pid(pid) == worker_pid:
                self.host_pid = pid
                return

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_detail(self, since: int) -> str:
        """Why the worker stopped: a fatal error it printed, or its exit status."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        fatal = re.findall(r"Fatal Python error: ([^\n]+)", self.output.text_since(since))
        if fatal:
            return fatal[0].strip()
        return describe_status(code, bwrap=self.spec.sandbox is Sandbox.BWRAP)

    def kill(self) -> None:
        """End the worker and close this end (once: a second call does nothing, so no descriptor is
        closed twice)."""
        if self._killed:
            return
        self._killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for fd in (self._to_worker, self._from_worker, self._info_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._drain.join(timeout=5)
        import shutil

        shutil.rmtree(self.scratch, ignore_errors=True)


def describe_status(code: int | None, *, bwrap: bool) -> str:
    if code is None:
        return "the process did not exit"
    sig = -code if code < 0 else (code - 128 if bwrap and code > 128 else 0)
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = {"SIGKILL": " (killed: out of memory, or the CPU-time limit)", "SIGSEGV": " (segmentation fault)"}
        return f"killed by {name}{hint.get(name, '')}"
    return f"exited with status {code} (os._exit, or an exit from a thread)"


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(x) for x in text.split()]
    except OSError:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                if int(stat[1]) == pid:
                    found.append(int(entry))
        return found


def _ns_pid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


@contextlib.contextmanager
def imports_unread() -> Iterator[None]:
    """The modules imported inside are marked read by Hypothesis without being read: it never draws
    inputs from their constants. For what a sandboxed worker imports when it is imported into the judge
    instead (--in-process, and the references a fork server preloads for it): a judge with a worker of
    its own never reads those."""
    before = set(sys.modules)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # Hypothesis' private set: where it is missing, nothing is hidden
            from hypothesis.internal.conjecture import providers

            providers._seen_modules.update(id(m) for name, m in list(sys.modules.items()) if name not in before)


@contextlib.contextmanager
def _traced(tracer: Any) -> Iterator[None]:
    """Python's trace function set to ``tracer`` for the frames started inside (this thread's)."""
    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(before)


class InProcessChannel:
    """The worker's server in this very process (``--in-process``)."""

    def __init__(self, spec: WorkerSpec, pull: Callable[[int, int], Any]):
        import torch

        self.spec = spec
        self.output = _Output()
        self.scratch = sandbox.make_scratch()
        self._tracer: Any = None
        paths = ["--path", str(ROOT)] if spec.allow_reference else []
        with imports_unread():  # the worker's code and the implementation's modules
            from lmspec.conformance.judge.worker import __main__ as entry
            from lmspec.conformance.judge.worker import protocol, serve

            args = entry.parse([*spec.worker_args(), "--scratch", str(self.scratch), *paths])
            torch.set_num_threads(spec.threads)  # as the worker sets its own (serve.serve_fds)
            self.server, ready = serve.start(args, self._pull(pull))
        self._serve = serve
        self._pending: bytes | None = protocol.encode({"ready": ready})
        self.host_pid = os.getpid()

    def _pull(self, pull: Callable[[int, int], Any]) -> Callable[[int, int], tuple[list, bool]]:
        def ask(ident: int, n: int) -> tuple[list, bool]:
            from lmspec.conformance.judge.worker import protocol
            from lmspec.conformance.judge.worker.serve import unpack_pull

            with _traced(self._tracer):  # the judge's own code, as when it answers a worker's pull
                answer = pull(ident, n)
            return unpack_pull(ident, protocol.decode(protocol.encode(answer)))

        return ask

    def send(self, data: bytes) -> None:
        # Hypothesis' explain phase traces the lines the judge runs (sys.settrace): the worker's are not the
        # judge's, and tracing them costs a failing test seconds (a GPT-2 forward, line by line)
        self._tracer = sys.gettrace()
        with _traced(None):
            self._pending = self._serve.handle(self.server, data)

    def receive(self, deadline: float) -> bytes:
        data, self._pending = self._pending, None
        if data is None:
            raise ChannelClosed("nothing to receive")
        return data

    def find_host_pid(self, worker_pid: int) -> None:
        pass

    def alive(self) -> bool:
        return True

    def exit_detail(self, since: int) -> str:
        return "in-process"

    def kill(self) -> None:
        import shutil

        shutil.rmtree(self.scratch, ignore_errors=True)
