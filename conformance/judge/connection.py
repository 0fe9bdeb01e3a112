"""The judge's connection to one worker at a time: start it, restart it
after a fault, send one request and wait for its reply (serving the
worker's pulls meanwhile), and turn what went wrong into a WorkerFault.

It knows frames and processes, not adapter functions: conformance/judge/
implementation.py builds on it.
"""

import time
from collections.abc import Callable
from typing import Any

from lmspec.conformance.judge.channel import ChannelClosed, ChannelTimeout, InProcessChannel, ProcessChannel
from lmspec.conformance.judge.faults import Fault, FaultRegistry, WorkerFault
from lmspec.conformance.judge.sandbox import WorkerSpec
from lmspec.conformance.judge.worker.protocol import ProtocolError, Tagged, decode, encode

Pull = Callable[[Any, Any], dict[str, Any]]


class Connection:
    """One worker at a time for one judge process."""

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        pull: Pull,
        registry: FaultRegistry,
        in_process: bool = False,
        call_timeout: float = 60.0,
        startup_timeout: float = 120.0,
    ):
        self.spec = spec
        self.pull = pull  # answers the worker's requests for items of a judge-side iterable
        self.registry = registry
        self.in_process = in_process
        self.call_timeout = call_timeout
        self.startup_timeout = startup_timeout
        self.channel: ProcessChannel | InProcessChannel | None = None
        self.generation = 0  # counts worker starts: handles of an older worker are gone
        self.ready: dict[str, Any] = {}
        self.start_error: WorkerFault | None = None
        self.startups: list[float] = []  # seconds of every worker start (restarts included)
        self.on_restart: list[Callable[[], None]] = []
        self.output_mark = 0  # bytes the worker printed during the last request
        self._seq = 0

    # --- the worker process -----------------------------------------------------------
    def start(self, early: ProcessChannel | None = None) -> None:
        """Start a worker, or take ``early``, one started ahead of its first use (its start-up
        counted from then)."""
        started = early.started_at if early is not None else time.monotonic()
        try:
            self._start_worker(early)
        finally:
            self.startups.append(round(time.monotonic() - started, 3))

    def _start_worker(self, early: ProcessChannel | None = None) -> None:
        self.generation += 1
        for forget in self.on_restart:
            forget()
        try:
            if early is not None:
                self.channel = early
            elif self.in_process:
                self.channel = InProcessChannel(self.spec, self.pull)
            else:
                self.channel = ProcessChannel(self.spec, self.startup_timeout)
            ready = decode(self.channel.receive(time.monotonic() + self.startup_timeout))
        except ChannelTimeout:
            self.stop()
            self.start_error = WorkerFault(
                Fault.TIMEOUT,
                f"the implementation could not be loaded: importing it took over {self.startup_timeout:g} s",
            )
            raise self.start_error from None
        except (ChannelClosed, ProtocolError, OSError) as exc:
            detail = self.channel.exit_detail(0) if self.channel is not None else str(exc)
            tail = self.channel.output.text_since(0)[-1500:].strip() if self.channel is not None else ""
            self.stop()
            message = f"the implementation could not be loaded: the worker died while importing it: {detail}"
            if tail:
                message += f"\n--- its last output ---\n{tail}"
            self.start_error = WorkerFault(Fault.LOAD, message)
            raise self.start_error from None
        if not isinstance(ready, dict) or not isinstance(ready.get("ready"), dict):
            self.stop()
            self.start_error = WorkerFault(Fault.PROTOCOL, "the worker's first message was not its ready report")
            raise self.start_error
        self.ready = ready["ready"]
        pid = self.ready.get("pid")
        if isinstance(pid, int):
            self.channel.find_host_pid(pid)

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.kill()
        self.channel = None

    def ensure_started(self) -> None:
        if self.start_error is not None:
            raise self.start_error
        if self.channel is None or not self.channel.alive():
            self.stop()
            self.start()

    @property
    def host_pid(self) -> int | None:
        return self.channel.host_pid if self.channel is not None else None

    # --- one request ----------------------------------------------------------------------
    def request(
        self,
        message: dict[str, Any],
        *,
        key: str,
        encode_hook: Callable[[Any], Any],
        decode_hook: Callable[[Tagged], Any],
    ) -> dict[str, Any]:
        """Send ``message``, serve the worker's pulls meanwhile, and return its
        reply (a dict with "ok" or "err"); a timeout, a crash or a protocol
        violation is a WorkerFault (and goes into the registry)."""
        __tracebackhide__ = True
        self.registry.check(key)
        self.ensure_started()
        channel = self.channel
        assert channel is not None
        self._seq += 1
        payload = encode({**message, "seq": self._seq}, encode_hook)
        mark = channel.output.total
        deadline = time.monotonic() + self.call_timeout
        ticks = int(message.get("repeat") or 1) - 1  # a repeat request: the limit holds per call
        try:
            channel.send(payload)
            while True:
                reply = decode(channel.receive(deadline), decode_hook)
                if isinstance(reply, dict) and "pull" in reply:
                    channel.send(encode(self.pull(reply.get("pull"), reply.get("n"))))
                    continue
                if isinstance(reply, dict) and "tick" in reply and ticks > 0:
                    ticks -= 1  # the next of the repeated calls starts: its own time limit
                    deadline = time.monotonic() + self.call_timeout
                    continue
                break
        except ChannelTimeout:
            self.stop()
            self.registry.add(key, Fault.TIMEOUT, f"no answer within {self.call_timeout:g} s")
            raise WorkerFault(
                Fault.TIMEOUT,
                f"Timeout: {key} did not return within {self.call_timeout:g} s (--timeout-per-call); the worker "
                f"was killed and {key} is not called again in this grade",
            ) from None
        except (ChannelClosed, OSError) as exc:
            detail = channel.exit_detail(mark) if isinstance(exc, ChannelClosed) else str(exc)
            self.stop()
            self.registry.add(key, Fault.CRASH, detail)
            raise WorkerFault(Fault.CRASH, f"crashed: the worker died during {key}: {detail}") from None
        except ProtocolError as exc:
            self.stop()
            raise WorkerFault(Fault.PROTOCOL, f"protocol violation by the worker during {key}: {exc}") from None
        finally:
            self.output_mark = channel.output.total - mark
        if not isinstance(reply, dict) or not ("ok" in reply or "err" in reply) or reply.get("seq") != self._seq:
            self.stop()
            raise WorkerFault(
                Fault.PROTOCOL, f"protocol violation by the worker during {key}: not the reply to this request"
            )
        return reply
