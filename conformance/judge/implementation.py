"""The implementation under test, as one judge process sees it: a worker
connection plus the bookkeeping of the objects that cross the door.

Each job has its own small part, composed here:
- ``Connection`` (connection.py): the worker process, one request at a time;
- ``FaultRegistry`` / ``RepeatCounter`` (faults.py): what not to call again;
- ``Pulls``: judge-side iterables the implementation consumes lazily;
- ``Handles``: worker-side objects the judge dropped (released on the next request);
- ``Mirrors``: the judge's parameters an optimizer in the worker holds;
- ``Audit``: the runtime from-scratch findings of the calls being audited;
- ``Paths``: worker-reported paths as the submission's author knows them;
- ``measure``: memory readings of the worker process (from /proc).
Adapter functions and remote objects (remote.py: ``RemoteFunction(impl,
name)``) go through ``request`` and ``result``.
"""

import contextlib
import itertools
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lmspec.conformance.judge import measure
from lmspec.conformance.judge.connection import Connection
from lmspec.conformance.judge.faults import (
    Fault,
    FaultRegistry,
    NotImplementedByAdapter,
    RepeatCounter,
    WorkerFault,
    remote_exception,
)
from lmspec.conformance.judge.sandbox import Paths, WorkerSpec
from lmspec.conformance.judge.worker.protocol import ProtocolError, Tagged
from lmspec.conformance.plain import plain

if TYPE_CHECKING:
    from lmspec.conformance.judge.channel import ProcessChannel
    from lmspec.conformance.profiles import Function

#: Top-level names of lmspec's own packages: a submission reaching for one is cheating.
LMSPEC_PACKAGES = ("reference", "conformance", "lmspec", "lmspec_worker")


def _plain(obj: Any) -> Any:
    return obj


def _no_objects(t: Tagged) -> Any:
    raise ProtocolError(f"the worker may not send a {t.kind!r} here")


class Pulls:
    """Judge-side iterables handed to the implementation (encode_iterable's
    input), served to the worker a batch at a time."""

    def __init__(self) -> None:
        self._items: dict[int, Iterator[Any]] = {}
        self.errors: dict[int, BaseException] = {}  # the iterable's own exception, raised again in the test
        self._ids = itertools.count(1)

    def register(self, iterable: Any) -> int:
        ident = next(self._ids)
        self._items[ident] = iter(iterable)
        return ident

    def serve(self, ident: Any, n: Any) -> dict[str, Any]:
        """The next items of a judge-side iterable, for the worker."""
        it = self._items.get(ident) if isinstance(ident, int) else None
        if it is None:
            return {"err": "unknown iterable"}
        count = max(1, min(int(n) if isinstance(n, int) else 1, 4096))
        items: list[Any] = []
        try:
            for _ in range(count):
                items.append(next(it))
        except StopIteration:
            self._items.pop(ident, None)
            return {"ok": items, "done": True}
        except Exception as exc:  # the judge's iterable failed (a pull limit...)
            self._items.pop(ident, None)
            if items:
                self._items[ident] = _raising(exc)  # deliver what we have; the error comes on the next pull
                return {"ok": items, "done": False}
            self.errors[ident] = exc
            return {"err": f"{type(exc).__name__}: {exc}"}
        return {"ok": items, "done": False}


class Handles:
    """Worker-side objects the judge dropped: released with the next request
    (only those of the worker that made them)."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.pending: list[int] = []
        connection.on_restart.append(self.pending.clear)

    def release(self, ident: int, generation: int) -> None:
        if generation == self.connection.generation:
            self.pending.append(ident)


class Mirrors:
    """Parameters of the judge that an optimizer in the worker holds: each
    has a number there; the worker's mirror goes with the judge's parameter."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self._ids: dict[int, tuple[weakref.ref, int]] = {}  # id(judge param) -> (ref, rid)
        self.forget: list[int] = []
        self._next = itertools.count(1)
        connection.on_restart.append(self._reset)

    def _reset(self) -> None:
        self._ids.clear()
        self.forget.clear()

    def id_of(self, p: torch.Tensor, create: bool) -> int | None:
        entry = self._ids.get(id(p))
        if entry is not None and entry[0]() is p:
            return entry[1]
        if not create:
            return None
        rid = next(self._next)
        self._ids[id(p)] = (weakref.ref(p), rid)
        generation = self.connection.generation
        weakref.finalize(p, lambda: self.forget.append(rid) if self.connection.generation == generation else None)
        return rid


class Audit:
    """Runtime from-scratch findings the worker reports for the calls of one
    function (and of the objects it returned) while ``collecting`` is open."""

    def __init__(self) -> None:
        self.findings: list[dict[str, str]] | None = None
        self.function = ""

    @contextlib.contextmanager
    def collecting(self, function: str) -> Iterator[list[dict[str, str]]]:
        self.findings, self.function = [], function
        try:
            yield self.findings
        finally:
            self.findings = None

    def covers(self, key: str) -> bool:
        f = self.function
        return self.findings is not None and (key == f or key.startswith((f + ".", f + "(")))

    def add(self, key: str, reply: dict[str, Any]) -> None:
        if self.findings is not None and self.covers(key):
            self.findings.extend(f for f in reply.get("audit") or [] if isinstance(f, dict))


class Implementation:
    """The implementation under test for one judge process."""

    def __init__(
        self,
        spec: WorkerSpec,
        functions: "Mapping[str, Function]",
        *,
        in_process: bool = False,
        call_timeout: float = 60.0,
        startup_timeout: float = 120.0,
        session_dir: Path | None = None,
        warnings: tuple[str, ...] = (),
        early: "ProcessChannel | None" = None,
    ):
        """``early``: the worker, started ahead of this (JudgeSession.start_early)."""
        self.spec = spec
        self.functions = functions  # the profile's adapter functions, by name
        self.warnings = list(warnings)
        self.registry = FaultRegistry(session_dir)
        self.repeats = RepeatCounter()
        self.pulls = Pulls()
        self.connection = Connection(
            spec,
            pull=self.pulls.serve,
            registry=self.registry,
            in_process=in_process,
            call_timeout=call_timeout,
            startup_timeout=startup_timeout,
        )
        self.handles = Handles(self.connection)
        self.mirrors = Mirrors(self.connection)
        self.audit = Audit()
        self.paths = Paths(spec.root)
        self.findings: list[str] = []  # compromise: lmspec's own code reached from the submission
        self.last_mutations: list[str] = []
        self.mutations: list[tuple[str, str]] = []  # (function, how it changed an argument), every call
        self.connection.start(early)
        if isinstance(self.ready.get("error"), dict):
            self._note_lmspec_import(self.ready["error"])

    # --- what the worker said when it started -----------------------------------------
    @property
    def ready(self) -> dict[str, Any]:
        return self.connection.ready

    @property
    def channel(self) -> Any:
        return self.connection.channel

    @property
    def generation(self) -> int:
        return self.connection.generation

    @property
    def startups(self) -> list[float]:
        return self.connection.startups

    @property
    def import_error(self) -> dict[str, Any] | None:
        error = self.ready.get("error")
        return error if isinstance(error, dict) else None

    def has(self, name: str) -> bool:
        return name in (self.ready.get("functions") or [])

    def absent(self, name: str) -> str:
        """Why ``name`` is missing, in the curriculum's words, as the worker's
        binder said it (submission-made: cleaned and bounded), or ""."""
        reasons = self.ready.get("absent")
        said = reasons.get(name) if isinstance(reasons, dict) else None
        return plain(str(said)).replace("\n", " ")[:600] if said else ""

    def close(self) -> None:
        self.connection.stop()

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
    def request(
        self,
        message: dict[str, Any],
        *,
        key: str,
        encode_hook: Callable[[Any], Any] = _plain,
        decode_hook: Callable[[Tagged], Any] = _no_objects,
    ) -> dict[str, Any]:
        """One request (objects in it encoded by ``encode_hook``), its reply
        (tagged values in it decoded by ``decode_hook``): remote.py supplies both."""
        __tracebackhide__ = True
        if self.handles.pending:
            message = {**message, "release": self.handles.pending}
        if self.mirrors.forget:
            message = {**message, "forget": self.mirrors.forget}
            self.mirrors.forget = []
        reply = self.connection.request(message, key=key, encode_hook=encode_hook, decode_hook=decode_hook)
        self.handles.pending = []
        self.audit.add(key, reply)
        return reply

    def result(self, reply: dict[str, Any], *, key: str) -> Any:
        """The value of a reply, or its exception raised here."""
        __tracebackhide__ = True
        if "err" in reply:
            err = reply["err"] if isinstance(reply["err"], dict) else {"message": str(reply["err"])}
            if err.get("protocol"):
                raise WorkerFault(Fault.PROTOCOL, f"the worker could not serve {key}: {err.get('message')}")
            ident = err.get("judge_iterable")
            if ident in self.pulls.errors:
                raise self.pulls.errors.pop(ident)
            if err.get("not_implemented"):
                name = key.split(".")[0]
                extended = name in self.functions and self.functions[name].extended
                raise NotImplementedByAdapter(name, extended, detail=str(err.get("message") or ""))
            self._note_lmspec_import(err)
            exc = remote_exception(err, self.spec.memory_gb)
            self.repeats.count(key, err, exc)
            raise exc
        mutated = reply.get("mutated")
        self.last_mutations = [str(m) for m in mutated] if isinstance(mutated, list) else []
        self.mutations.extend((key, m) for m in self.last_mutations)
        return reply["ok"]

    def begin_test(self, nodeid: str) -> None:
        """A new test starts: its repeated-failure counts start from zero."""
        self.repeats.begin(nodeid)

    def ensure_started(self) -> None:
        self.connection.ensure_started()

    def modules(self) -> tuple[list[tuple[str, str]], list[str]]:
        """(module name, file) of every module the worker imported, and the
        names of lmspec's packages the submission tried to import."""
        data = self.result(self.request({"op": "modules"}, key="modules"), key="modules")
        if not isinstance(data, dict):
            raise WorkerFault(Fault.PROTOCOL, "protocol violation: bad module list")
        modules = [(str(n), str(f)) for n, f in data.get("modules") or []]
        return modules, [str(a) for a in data.get("attempts") or []]

    # --- the audit, paths, measurements ----------------------------------------------------
    def auditing(self, function: str) -> Any:
        """Collect the runtime audit findings of the calls of ``function``."""
        return self.audit.collecting(function)

    def audited(self, key: str) -> bool:
        return self.audit.covers(key)

    def host_path(self, path: str) -> str:
        return self.paths.host(path)

    def display(self, where: str) -> str:
        return self.paths.display(where)

    def memory_kib(self) -> dict[str, int]:
        """VmRSS and VmHWM of the worker process, in KiB."""
        return measure.memory_kib(self.connection.host_pid)

    def reset_peak(self) -> None:
        measure.reset_peak(self.connection.host_pid)


def _raising(exc: BaseException) -> Iterator[Any]:
    raise exc
    yield  # pragma: no cover
