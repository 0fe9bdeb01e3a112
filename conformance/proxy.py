"""The judge's view of the implementation under test: proxies with the
adapter functions' signatures that forward every call to the worker.

A test receives ``run_linear`` (a fixture) and calls it as usual; the proxy
turns the call into the official calling convention (conformance.adapter
.CALL_STYLE: keyword arguments except where the official tests pass
positionally), sends fresh copies of the arguments, waits at most the
per-call limit, and returns the decoded result. Objects that live in the
worker come back as proxies: a Tokenizer (methods forwarded; its
``encode_iterable`` streams the judge's iterable lazily both ways), an
optimizer class and its instances (``step`` sends the current parameter
values and gradients, applies the new values to the judge's parameters), an
iterator (items fetched in batches).

In-place effects the interface defines come back as write-backs (gradient
clipping's gradients, load_checkpoint's model and optimizer, the file
save_checkpoint writes, a sampler's torch.Generator); any other change the
implementation makes to its arguments stays in the worker and is reported
(``last_mutations``): a STRICT finding, never a corrupted oracle.

Faults: no answer within the limit kills the worker (a fresh one serves the
next call) and fails the test as a timeout; that function is then never
called again in this grade (shared by every judge process through
``session_dir``), so a hanging function costs one timeout, not one per test.
A worker that dies fails the call as a crash; after CRASH_LIMIT crashes of the
same function it is not called again either.
"""

import contextlib
import itertools
import json
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from _pytest.outcomes import OutcomeException

from lmspec.conformance.adapter import NotImplementedByAdapter
from lmspec.conformance.channel import ChannelClosed, ChannelTimeout, InProcessChannel, ProcessChannel
from lmspec.conformance.outcomes import Fault
from lmspec.conformance.sandbox import WorkerSpec
from lmspec.tools.worker.protocol import ProtocolError, Tagged, decode, encode

if TYPE_CHECKING:
    from lmspec.conformance.remote import RemoteFunction, _Marshal

CRASH_LIMIT = 3
#: Top-level names of lmspec's own packages: a submission reaching for one is cheating.
LMSPEC_PACKAGES = ("reference", "conformance", "lmspec", "lmspec_worker")


class WorkerFault(OutcomeException):
    """A call that did not complete: timeout, crash, protocol violation,
    failed start. A pytest outcome but not ``Failed`` (which Hypothesis
    catches to replay and shrink): Hypothesis lets it through at once, pytest
    reports the test failed with this message, and the plugin reports
    ``fault`` with it."""

    def __init__(self, fault: Fault, message: str):
        super().__init__(message, pytrace=False)
        self.fault = fault


class RepeatedFailure(OutcomeException):
    """The implementation raised the same exception on REPEAT_LIMIT inputs of
    one test: the test fails with that first failure at once, without calling
    the function on the rest of its examples (Hypothesis lets a pytest
    outcome through without shrinking it further)."""


#: Identical exceptions from one function within one test before it stops.
REPEAT_LIMIT = 5


class SubmissionError(Exception):
    """An exception raised by the implementation, as the worker described it."""

    remote_type = ""
    remote_traceback = ""


_EXCEPTION_TYPES: dict[tuple[str, str], type] = {}
_SAFE_BASES = {
    c.__name__: c
    for c in (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        LookupError,
        RuntimeError,
        AssertionError,
        AttributeError,
        ArithmeticError,
        ZeroDivisionError,
        OverflowError,
        MemoryError,
        OSError,
        FileNotFoundError,
        ImportError,
        ModuleNotFoundError,
        UnicodeError,
        UnicodeDecodeError,
        UnicodeEncodeError,
        NotImplementedError,
        RecursionError,
    )
}


def remote_exception(err: dict[str, Any], memory_gb: float | None) -> Exception:
    """A judge-side exception for the worker's description: a SubmissionError
    that also derives from the builtin classes the original derived from (so
    ``pytest.raises(ValueError)`` still works), never a BaseException that
    would stop the judge (SystemExit, KeyboardInterrupt)."""
    name = str(err.get("type", "Exception"))
    bases = tuple(_SAFE_BASES[b] for b in err.get("bases") or [] if b in _SAFE_BASES)
    bases = tuple(b for b in bases if not any(b is not o and issubclass(o, b) for o in bases))
    key = (name, ",".join(b.__name__ for b in bases))
    cls = _EXCEPTION_TYPES.get(key)
    if cls is None:
        label = name if name.isidentifier() else "SubmissionError"
        namespace = {"__module__": "submission"}  # pytest shows "submission.ValueError: ..."
        try:
            cls = type(label, (SubmissionError, *bases), namespace)
        except TypeError:  # incompatible layouts (e.g. two OSError children)
            cls = type(label, (SubmissionError,), namespace)
        _EXCEPTION_TYPES[key] = cls
    message = str(err.get("message", ""))
    text = message
    if name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
        text = f"{name}({message}) raised inside {err.get('in')}"
    if memory_gb and (name == "MemoryError" or "can't allocate memory" in message or "Unable to allocate" in message):
        text = f"memory limit exceeded (--memory-limit {memory_gb:g} GB): {text}"
    tb = str(err.get("traceback") or "")
    exc = cls.__new__(cls)
    Exception.__init__(exc, text + (f"\n--- in the implementation ---\n{tb.rstrip()}" if tb else ""))
    exc.remote_type = name
    exc.remote_traceback = tb
    return exc


class _Registry:
    """Functions that timed out or crashed, shared by the judge processes of
    one session through a file (one JSON line per event)."""

    def __init__(self, folder: Path | None):
        self.path = folder / "faults.jsonl" if folder is not None else None
        self.local: list[dict[str, Any]] = []

    def add(self, key: str, fault: Fault, detail: str) -> None:
        event = {"key": key, "fault": str(fault), "detail": detail}
        self.local.append(event)
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(event) + "\n")

    def events(self, key: str) -> list[dict[str, Any]]:
        events = self.local
        if self.path is not None and self.path.exists():
            events = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        return [e for e in events if e.get("key") == key]


class Implementation:
    """The implementation under test for one judge process: one worker at a
    time, restarted after a fault; proxies for its functions."""

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        in_process: bool = False,
        call_timeout: float = 60.0,
        startup_timeout: float = 120.0,
        session_dir: Path | None = None,
        warnings: tuple[str, ...] = (),
    ):
        self.spec = spec
        self.in_process = in_process
        self.call_timeout = call_timeout
        self.startup_timeout = startup_timeout
        self.registry = _Registry(session_dir)
        self.warnings = list(warnings)
        self.channel: ProcessChannel | InProcessChannel | None = None
        self.generation = 0
        self.ready: dict[str, Any] = {}
        self.start_error: WorkerFault | None = None
        self.findings: list[str] = []  # compromise: lmspec's own code reached from the submission
        self.audit: list[dict[str, str]] | None = None  # collecting runtime findings when a list
        self._audited = ""
        self.last_mutations: list[str] = []
        self.mutations: list[tuple[str, str]] = []  # (function, how it changed an argument), every call
        self.output_mark = 0
        self._pulls: dict[int, Iterator[Any]] = {}
        self._pull_errors: dict[int, BaseException] = {}
        self._release: list[int] = []
        self._mirrors: dict[int, tuple[weakref.ref, int]] = {}  # id(judge param) -> (ref, rid)
        self._forget: list[int] = []
        self._ids = itertools.count(1)
        self._seq = 0
        self.startups: list[float] = []  # seconds of every worker start (restarts included)
        self.current_test = ""
        self._repeats: dict[tuple[str, str, str], tuple[Exception, int]] = {}
        self._start()

    # --- the worker process -------------------------------------------------------------
    def _start(self) -> None:
        started = time.monotonic()
        try:
            self._start_worker()
        finally:
            self.startups.append(round(time.monotonic() - started, 3))

    def _start_worker(self) -> None:
        self.generation += 1
        self._mirrors.clear()
        self._forget.clear()
        self._release.clear()
        try:
            if self.in_process:
                self.channel = InProcessChannel(self.spec, self._serve_pull)
            else:
                self.channel = ProcessChannel(self.spec, self.startup_timeout)
            ready = decode(self.channel.receive(time.monotonic() + self.startup_timeout))
        except ChannelTimeout:
            self._stop()
            self.start_error = WorkerFault(
                Fault.TIMEOUT,
                f"the implementation could not be loaded: importing it took over {self.startup_timeout:g} s",
            )
            raise self.start_error from None
        except (ChannelClosed, ProtocolError, OSError) as exc:
            detail = self.channel.exit_detail(0) if self.channel is not None else str(exc)
            tail = self.channel.output.text_since(0)[-1500:].strip() if self.channel is not None else ""
            self._stop()
            message = f"the implementation could not be loaded: the worker died while importing it: {detail}"
            if tail:
                message += f"\n--- its last output ---\n{tail}"
            self.start_error = WorkerFault(Fault.LOAD, message)
            raise self.start_error from None
        if not isinstance(ready, dict) or not isinstance(ready.get("ready"), dict):
            self._stop()
            self.start_error = WorkerFault(Fault.PROTOCOL, "the worker's first message was not its ready report")
            raise self.start_error
        self.ready = ready["ready"]
        pid = self.ready.get("pid")
        if isinstance(pid, int):
            self.channel.find_host_pid(pid)
        error = self.ready.get("error")
        if isinstance(error, dict):
            self._note_lmspec_import(error)

    def _stop(self) -> None:
        if self.channel is not None:
            self.channel.kill()
        self.channel = None

    def close(self) -> None:
        self._stop()

    @property
    def import_error(self) -> dict[str, Any] | None:
        error = self.ready.get("error")
        return error if isinstance(error, dict) else None

    def has(self, name: str) -> bool:
        return name in (self.ready.get("functions") or [])

    def _note_lmspec_import(self, err: dict[str, Any]) -> None:
        """A submission that reaches for lmspec's own packages (absent from
        its sandbox) is trying to hand in the reference or the oracles."""
        if err.get("type") != "ModuleNotFoundError":
            return
        message = str(err.get("message", ""))
        for name in LMSPEC_PACKAGES:
            if f"'{name}'" in message or f"'{name}." in message:
                root = self.spec.root
                if root is None or not ((root / name).is_dir() or (root / f"{name}.py").is_file()):
                    self.findings.append(f"the submission imports lmspec's own package {name!r}: {message}")

    # --- requests ---------------------------------------------------------------------------
    def request(self, message: dict[str, Any], *, key: str, marshal: "_Marshal | None" = None) -> Any:
        """Send one request, serve the worker's pulls meanwhile, and return
        the decoded reply (a dict with "ok" or "err")."""
        __tracebackhide__ = True
        for event in self.registry.events(key):
            if event["fault"] == Fault.TIMEOUT:
                raise WorkerFault(
                    Fault.TIMEOUT,
                    f"Timeout: not called: {key} timed out earlier in this grade ({event['detail']})",
                )
        crashes = [e for e in self.registry.events(key) if e["fault"] == Fault.CRASH]
        if len(crashes) >= CRASH_LIMIT:
            raise WorkerFault(
                Fault.CRASH, f"crashed: not called: {key} crashed the worker {len(crashes)} times in this grade"
            )
        if self.start_error is not None:
            raise self.start_error
        if self.channel is None or not self.channel.alive():
            self._stop()
            self._start()
        channel = self.channel
        assert channel is not None
        if marshal is None:
            from lmspec.conformance.remote import _Marshal

            marshal = _Marshal(self)
        self._seq += 1
        message = {**message, "seq": self._seq}
        if self._release:
            message["release"] = self._release
        if self._forget:
            message["forget"], self._forget = self._forget, []
        payload = encode(message, marshal.hook)
        self._release = []
        mark = channel.output.total
        deadline = time.monotonic() + self.call_timeout
        try:
            channel.send(payload)
            while True:
                reply = decode(channel.receive(deadline), self._decode_hook(key, marshal))
                if isinstance(reply, dict) and "pull" in reply:
                    channel.send(encode(self._serve_pull(reply.get("pull"), reply.get("n"))))
                    continue
                break
        except ChannelTimeout:
            self._stop()
            detail = f"no answer within {self.call_timeout:g} s"
            self.registry.add(key, Fault.TIMEOUT, detail)
            raise WorkerFault(
                Fault.TIMEOUT,
                f"Timeout: {key} did not return within {self.call_timeout:g} s (--timeout-per-call); the worker "
                f"was killed and {key} is not called again in this grade",
            ) from None
        except (ChannelClosed, OSError) as exc:
            detail = channel.exit_detail(mark) if isinstance(exc, ChannelClosed) else str(exc)
            self._stop()
            self.registry.add(key, Fault.CRASH, detail)
            raise WorkerFault(Fault.CRASH, f"crashed: the worker died during {key}: {detail}") from None
        except ProtocolError as exc:
            self._stop()
            raise WorkerFault(Fault.PROTOCOL, f"protocol violation by the worker during {key}: {exc}") from None
        finally:
            self.output_mark = channel.output.total - mark
        if not isinstance(reply, dict) or not ("ok" in reply or "err" in reply) or reply.get("seq") != self._seq:
            self._stop()
            raise WorkerFault(
                Fault.PROTOCOL, f"protocol violation by the worker during {key}: not the reply to this request"
            )
        if self.audit is not None and self.audited(key):
            self.audit.extend(f for f in reply.get("audit") or [] if isinstance(f, dict))
        return reply

    def result(self, reply: dict[str, Any], *, key: str) -> Any:
        """The value of a reply, or its exception raised here."""
        __tracebackhide__ = True
        if "err" in reply:
            err = reply["err"] if isinstance(reply["err"], dict) else {"message": str(reply["err"])}
            if err.get("protocol"):
                raise WorkerFault(Fault.PROTOCOL, f"the worker could not serve {key}: {err.get('message')}")
            ident = err.get("judge_iterable")
            if ident in self._pull_errors:
                raise self._pull_errors.pop(ident)
            if err.get("not_implemented"):
                raise NotImplementedByAdapter(key.split(".")[0], extended=False, detail=str(err.get("message") or ""))
            self._note_lmspec_import(err)
            exc = remote_exception(err, self.spec.memory_gb)
            self._count_repeats(key, err, exc)
            raise exc
        mutated = reply.get("mutated")
        self.last_mutations = [str(m) for m in mutated] if isinstance(mutated, list) else []
        self.mutations.extend((key, m) for m in self.last_mutations)
        return reply["ok"]

    def begin_test(self, nodeid: str) -> None:
        """A new test starts: its repeated-failure counts start from zero."""
        self.current_test = nodeid
        self._repeats.clear()

    def _count_repeats(self, key: str, err: dict[str, Any], exc: Exception) -> None:
        """After REPEAT_LIMIT identical failures of ``key`` in this test, end it."""
        signature = (key, str(err.get("type")), str(err.get("message", "")).split("\n", 1)[0][:300])
        first, count = self._repeats.get(signature, (exc, 0))
        self._repeats[signature] = (first, count + 1)
        if count + 1 >= REPEAT_LIMIT:
            raise RepeatedFailure(
                f"{first.remote_type}: {first}\n(the same failure on {count + 1} inputs of this test; "  # type: ignore[attr-defined]
                f"{key} was not called on the rest)",
                pytrace=False,
            )

    def _decode_hook(self, key: str, marshal: "_Marshal") -> Callable[[Tagged], Any]:
        creator = key.split(".")[0]

        def hook(t: Tagged) -> Any:
            if t.kind == "handle":
                from lmspec.conformance.remote import RemoteObject

                return RemoteObject.make(self, dict(t), creator=creator)
            if t.kind == "path":
                return Path(str(t.get("path")))
            if t.kind == "dtype":
                dtype = getattr(torch, str(t.get("name")), None)
                if not isinstance(dtype, torch.dtype):
                    raise ProtocolError(f"unknown dtype {t.get('name')!r}")
                return dtype
            if t.kind == "device":
                return torch.device(str(t.get("name")))
            raise ProtocolError(f"the worker may not send a {t.kind!r}")

        return hook

    def _serve_pull(self, ident: Any, n: Any) -> dict[str, Any]:
        """The next items of a judge-side iterable, for the worker."""
        it = self._pulls.get(ident) if isinstance(ident, int) else None
        if it is None:
            return {"err": "unknown iterable"}
        count = max(1, min(int(n) if isinstance(n, int) else 1, 4096))
        items: list[Any] = []
        try:
            for _ in range(count):
                items.append(next(it))
        except StopIteration:
            self._pulls.pop(ident, None)
            return {"ok": items, "done": True}
        except Exception as exc:  # the judge's iterable failed (a pull limit...)
            self._pulls.pop(ident, None)
            if items:
                # deliver what we have; the error comes on the next pull
                self._pulls[ident] = _raising(exc)
                return {"ok": items, "done": False}
            self._pull_errors[ident] = exc
            return {"err": f"{type(exc).__name__}: {exc}"}
        return {"ok": items, "done": False}

    def register_pull(self, iterable: Any) -> int:
        ident = next(self._ids)
        self._pulls[ident] = iter(iterable)
        return ident

    def release(self, ident: int, generation: int) -> None:
        if generation == self.generation:
            self._release.append(ident)

    # --- parameters mirrored in the worker (an optimizer's) ---------------------------------
    def mirror_id(self, p: torch.Tensor, create: bool) -> int | None:
        entry = self._mirrors.get(id(p))
        if entry is not None and entry[0]() is p:
            return entry[1]
        if not create:
            return None
        rid = next(self._ids)
        self._mirrors[id(p)] = (weakref.ref(p), rid)
        generation = self.generation
        # the worker's mirror goes with the judge's parameter
        weakref.finalize(p, lambda: self._forget.append(rid) if self.generation == generation else None)
        return rid

    # --- measurements of the worker (judge-side, from /proc) -------------------------------
    def memory_kib(self) -> dict[str, int]:
        """VmRSS and VmHWM of the worker process, in KiB."""
        pid = self.channel.host_pid if self.channel is not None else None
        if pid is None:
            raise RuntimeError("the worker's process is not known (not on Linux?)")
        out = {}
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            field, _, value = line.partition(":")
            if field in ("VmRSS", "VmHWM"):
                out[field] = int(value.split()[0])
        return out

    def reset_peak(self) -> None:
        """Reset the worker's peak resident set (VmHWM) to its current size."""
        pid = self.channel.host_pid if self.channel is not None else None
        if pid is None:
            raise RuntimeError("the worker's process is not known (not on Linux?)")
        Path(f"/proc/{pid}/clear_refs").write_text("5")

    def ensure_started(self) -> None:
        if self.start_error is not None:
            raise self.start_error
        if self.channel is None or not self.channel.alive():
            self._stop()
            self._start()

    @contextlib.contextmanager
    def auditing(self, function: str) -> Iterator[list[dict[str, str]]]:
        """Collect the worker's runtime audit findings of the calls of
        ``function`` (and of the objects it returned) made inside."""
        self.audit, self._audited = [], function
        try:
            yield self.audit
        finally:
            self.audit = None

    def audited(self, key: str) -> bool:
        return self.audit is not None and (
            key == self._audited or key.startswith((self._audited + ".", self._audited + "("))
        )

    def host_path(self, path: str) -> str:
        """A path the worker reported, as this judge sees it (the sandbox
        shows lmspec's reference, for its own meta-test adapters, elsewhere)."""
        from lmspec.conformance.sandbox import REPO, SANDBOX_BASE_DIR

        if path.startswith(SANDBOX_BASE_DIR + "/lmspec/"):
            return str(REPO) + path[len(SANDBOX_BASE_DIR) + len("/lmspec") :]
        return path

    def display(self, where: str) -> str:
        """A worker-reported "path:line" as the submission's author knows it:
        relative to the submission's folder (or to lmspec for its reference)."""
        from lmspec.conformance.sandbox import REPO

        path = self.host_path(where)
        for base in (self.spec.root, REPO):
            if base is not None and path.startswith(str(base) + "/"):
                return path[len(str(base)) + 1 :]
        return path

    def modules(self) -> tuple[list[tuple[str, str]], list[str]]:
        """(module name, file) of every module the worker imported, and the
        names of lmspec's packages the submission tried to import."""
        reply = self.request({"op": "modules"}, key="modules")
        data = self.result(reply, key="modules")
        if not isinstance(data, dict):
            raise WorkerFault(Fault.PROTOCOL, "protocol violation: bad module list")
        modules = [(str(n), str(f)) for n, f in data.get("modules") or []]
        return modules, [str(a) for a in data.get("attempts") or []]

    # --- the adapter functions ----------------------------------------------------------------
    def function(self, name: str) -> "RemoteFunction":
        from lmspec.conformance.remote import RemoteFunction

        return RemoteFunction(self, name)


def _raising(exc: BaseException) -> Iterator[Any]:
    raise exc
    yield  # pragma: no cover
