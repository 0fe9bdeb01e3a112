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
import errno
import io
import itertools
import json
import os
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch
from _pytest.outcomes import OutcomeException

from conformance.adapter import CALL_STYLE, FILE_ARGS, REPLAYABLE, WRITEBACK_ARGS, NotImplementedByAdapter, signature
from conformance.channel import ChannelClosed, ChannelTimeout, InProcessChannel, ProcessChannel
from conformance.outcomes import Fault
from conformance.sandbox import WorkerSpec
from tools.worker.protocol import ProtocolError, Tagged, decode, encode

CRASH_LIMIT = 3
#: Parameters whose module names mean "lmspec's own code": importing them from a submission is cheating.
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
        try:
            cls = type(name if name.isidentifier() else "SubmissionError", (SubmissionError, *bases), {})
        except TypeError:  # incompatible layouts (e.g. two OSError children)
            cls = type(name if name.isidentifier() else "SubmissionError", (SubmissionError,), {})
        _EXCEPTION_TYPES[key] = cls
    message = str(err.get("message", ""))
    where = err.get("in")
    text = f"{name}: {message}" if message else name
    if name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
        text = f"{name}({message}) raised inside {where}"
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
        self._start()

    # --- the worker process -------------------------------------------------------------
    def _start(self) -> None:
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
        marshal = marshal or _Marshal(self)
        self._seq += 1
        message = {**message, "seq": self._seq}
        if self._release:
            message["release"] = self._release
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
            raise remote_exception(err, self.spec.memory_gb)
        mutated = reply.get("mutated")
        self.last_mutations = [str(m) for m in mutated] if isinstance(mutated, list) else []
        self.mutations.extend((key, m) for m in self.last_mutations)
        return reply["ok"]

    def _decode_hook(self, key: str, marshal: "_Marshal") -> Callable[[Tagged], Any]:
        creator = key.split(".")[0]

        def hook(t: Tagged) -> Any:
            if t.kind == "handle":
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
        from conformance.sandbox import REPO, SANDBOX_BASE_DIR

        if path.startswith(SANDBOX_BASE_DIR + "/"):
            return str(REPO) + path[len(SANDBOX_BASE_DIR) :]
        return path

    def display(self, where: str) -> str:
        """A worker-reported "path:line" as the submission's author knows it:
        relative to the submission's folder (or to lmspec for its reference)."""
        from conformance.sandbox import REPO

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
        return RemoteFunction(self, name)


def _raising(exc: BaseException) -> Iterator[Any]:
    raise exc
    yield  # pragma: no cover


class _Marshal:
    """Encodes the judge's objects for one request: parameters (memoized, so
    a tied or shared parameter stays one object; mirrored when an optimizer
    in the worker holds them), modules, optimizers, generators, files,
    memmaps, iterables; marks the write-back ones."""

    def __init__(self, impl: Implementation, writeback: tuple[Any, ...] = ()):
        self.impl = impl
        self.memo: dict[int, int] = {}
        self.wb_ids: set[int] = set()
        self.wb: list[Any] = []
        self.keep: list[Any] = []  # keeps converted temporaries alive while encoding
        for obj in writeback:
            self._mark(obj)

    def _mark(self, obj: Any) -> None:
        if isinstance(obj, _Materialized):
            for item in obj.items:
                self._mark(item)
        elif isinstance(obj, list | tuple):
            for item in obj:
                self._mark(item)
        elif isinstance(
            obj, torch.Tensor | torch.nn.Module | torch.optim.Optimizer | torch.Generator | io.BytesIO | _OutFile
        ):
            self.wb_ids.add(id(obj))

    def _wb(self, obj: Any, tagged: Tagged) -> Tagged:
        if id(obj) in self.wb_ids:
            tagged["wb"] = len(self.wb)
            self.wb.append(obj)
        return tagged

    def hook(self, obj: Any) -> Any:
        if isinstance(obj, torch.nn.Parameter):
            return self.param(obj)
        if isinstance(obj, RemoteObject | RemoteOptimizer):
            return Tagged("handle", id=obj.handle_id())
        if isinstance(obj, torch.Tensor | np.ndarray | tuple | Tagged) and not isinstance(obj, np.memmap):
            if isinstance(obj, np.ndarray) and obj.dtype.kind not in "biuf":
                raise ProtocolError(f"cannot send a numpy array of dtype {obj.dtype}")
            return obj
        if isinstance(obj, np.memmap):
            return _memmap(obj)
        if isinstance(obj, torch.nn.Module):
            return self._wb(obj, self.module(obj))
        if isinstance(obj, torch.optim.Optimizer):
            return self._wb(obj, self.optimizer(obj))
        if isinstance(obj, torch.Generator):
            return self._wb(obj, Tagged("generator", device=str(obj.device), state=obj.get_state()))
        if isinstance(obj, io.BytesIO):
            return self._wb(obj, Tagged("bytesio", data=obj.getvalue(), pos=obj.tell()))
        if isinstance(obj, _InFile | _OutFile | _Materialized | _Pulled):
            return self._wb(obj, obj.tagged())
        if isinstance(obj, PurePath):
            return Tagged("path", path=str(obj))
        if isinstance(obj, torch.dtype):
            return Tagged("dtype", name=str(obj).removeprefix("torch."))
        if isinstance(obj, torch.device):
            return Tagged("device", name=str(obj))
        return obj

    def param(self, p: torch.Tensor) -> Tagged:
        if id(p) in self.memo:
            return Tagged("ref", memo=self.memo[id(p)])
        self.memo[id(p)] = len(self.memo)
        self.keep.append(p)
        tagged = Tagged(
            "param",
            memo=self.memo[id(p)],
            data=p.detach(),
            grad=None if p.grad is None else p.grad.detach(),
            requires_grad=p.requires_grad,
        )
        rid = self.impl.mirror_id(p, create=False)
        if rid is not None:
            tagged["rid"] = rid
        return self._wb(p, tagged)

    def module(self, m: torch.nn.Module) -> Tagged:
        transient = set(getattr(m, "_non_persistent_buffers_set", ()))
        return Tagged(
            "module",
            cls=f"{type(m).__module__}.{type(m).__qualname__}",
            children={name: child for name, child in m.named_children()},
            params={name: p for name, p in m.named_parameters(recurse=False)},
            buffers={name: b for name, b in m.named_buffers(recurse=False)},
            nonpersistent=sorted(transient),
        )

    def optimizer(self, opt: torch.optim.Optimizer) -> Tagged:
        cls = type(opt)
        name = f"torch.optim.{cls.__name__}" if cls.__module__.startswith("torch.optim") else cls.__qualname__
        groups = [{k: v for k, v in g.items()} for g in opt.param_groups]
        return Tagged("optimizer", cls=name, groups=groups, state=opt.state_dict())


class _InFile:
    def __init__(self, value: Any):
        path = Path(value)
        self.kind = "path" if isinstance(value, PurePath) else "str"
        self.name = path.name
        self.data = path.read_bytes()

    def tagged(self) -> Tagged:
        return Tagged("infile", name=self.name, data=self.data, **{"as": self.kind})


class _OutFile:
    def __init__(self, value: Any):
        self.path = Path(value)
        self.kind = "path" if isinstance(value, PurePath) else "str"

    def tagged(self) -> Tagged:
        return Tagged("outfile", name=self.path.name, **{"as": self.kind})


class _Materialized:
    """A judge-side iterator/generator argument (e.g. parameters for
    clipping), sent as its items and given to the implementation as a
    generator again."""

    def __init__(self, iterable: Iterator[Any]):
        self.items = list(itertools.islice(iterable, 1_000_001))
        if len(self.items) > 1_000_000:
            raise ProtocolError("an iterable argument of over a million items")

    def tagged(self) -> Tagged:
        return Tagged("iterable", items=self.items, **{"as": "generator"})


class _Pulled:
    """A judge-side iterable the implementation consumes lazily (encode_iterable)."""

    def __init__(self, impl: Implementation, iterable: Any):
        self.ident = impl.register_pull(iterable)

    def tagged(self) -> Tagged:
        return Tagged("pull", id=self.ident)


def _memmap(a: np.memmap) -> Tagged:
    """A memmap as its file's data segments (holes stay holes) plus the view."""
    path = Path(a.filename)
    size = path.stat().st_size
    segments = []
    with open(path, "rb") as f:
        fd = f.fileno()
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO and pos == 0:  # SEEK_DATA unsupported: all of it
                    segments.append([0, path.read_bytes()])
                break  # ENXIO: nothing but holes after pos
            end = os.lseek(fd, start, os.SEEK_HOLE)
            f.seek(start)
            segments.append([start, f.read(end - start)])
            pos = end
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    return Tagged(
        "memmap",
        name=path.name,
        size=size,
        segments=segments,
        dtype=a.dtype.str,
        shape=list(a.shape),
        offset=int(a.offset),
        order=order,
    )


def _apply_updates(wb: list[Any], updates: Any) -> None:
    """The in-place effects the worker reported, applied to the judge's objects."""
    if not isinstance(updates, dict):
        return
    for index, update in updates.items():
        if not isinstance(index, int) or not 0 <= index < len(wb) or not isinstance(update, dict):
            raise ProtocolError("bad write-back")
        obj = wb[index]
        if isinstance(obj, torch.Tensor):
            _update_param(obj, update)
        elif isinstance(obj, torch.nn.Module):
            state = obj.state_dict(keep_vars=True)
            for name, value in (update.get("state") or {}).items():
                if name in state and isinstance(value, torch.Tensor) and value.shape == state[name].shape:
                    with torch.no_grad():
                        state[name].copy_(value)
        elif isinstance(obj, torch.optim.Optimizer):
            if isinstance(update.get("state"), dict):
                obj.load_state_dict(update["state"])
        elif isinstance(obj, torch.Generator):
            if isinstance(update.get("state"), torch.Tensor):
                obj.set_state(update["state"])
        elif isinstance(obj, io.BytesIO):
            data, pos = update.get("data"), update.get("pos")
            if isinstance(data, bytes) and isinstance(pos, int):
                obj.seek(0)
                obj.truncate()
                obj.write(data)
                obj.seek(pos)
        elif isinstance(obj, _OutFile) and isinstance(update.get("data"), bytes):
            obj.path.write_bytes(update["data"])


def _update_param(p: torch.Tensor, update: dict[str, Any]) -> None:
    data, grad = update.get("data"), update.get("grad")
    with torch.no_grad():
        if isinstance(data, torch.Tensor) and data.shape == p.shape:
            p.copy_(data)
        if grad is None:
            p.grad = None
        elif isinstance(grad, torch.Tensor):
            if update.get("grad_kept") and p.grad is not None and p.grad.shape == grad.shape:
                p.grad.copy_(grad)  # changed in place (or not at all): the same tensor
            else:
                p.grad = grad.to(p.device)  # replaced by a new tensor


def _prepare(impl: Implementation, name: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """Arguments as they travel: file paths as files, iterators as their
    items; and the write-back objects among them."""
    out = dict(kwargs)
    for arg, direction in FILE_ARGS.get(name, {}).items():
        value = out.get(arg)
        if isinstance(value, str | PurePath):
            out[arg] = _InFile(value) if direction == "in" else _OutFile(value)
    for arg, value in out.items():
        if isinstance(value, Iterator) and not isinstance(value, io.IOBase):
            out[arg] = _Materialized(value)
    writeback = tuple(out[a] for a in WRITEBACK_ARGS.get(name, ()) if a in out)
    return out, writeback


class RemoteFunction:
    """An adapter function of the implementation, called as the official
    tests call it."""

    def __init__(self, impl: Implementation, name: str):
        self.impl = impl
        self.name = self.__name__ = self.__qualname__ = name
        self.__signature__ = signature(name)

    @property
    def last_mutations(self) -> list[str]:
        """How the last call changed its arguments (in the worker's copy)."""
        return self.impl.last_mutations

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = self.__signature__.bind(*args, **kwargs)
        named = dict(bound.arguments)
        if self.name == "get_tokenizer":
            named.setdefault("special_tokens", None)  # the official tests always pass it
        return self.impl_call(named)

    def impl_call(self, named: dict[str, Any], *, replay_of: "RemoteObject | None" = None) -> Any:
        impl = self.impl
        prepared, writeback = _prepare(impl, self.name, named)
        positional_count = CALL_STYLE.get(self.name, 0)
        names = list(self.__signature__.parameters)
        args = [prepared.pop(n) for n in names[:positional_count] if n in prepared]
        marshal = _Marshal(impl, writeback)
        optimizers = [v for v in named.values() if isinstance(v, RemoteOptimizer)]
        for opt in optimizers:
            opt.sync()  # the worker's copy of its parameters, current
        message = {
            "op": "call",
            "fn": self.name,
            "args": args,
            "names": names[: len(args)],
            "kwargs": prepared,
            "audit": impl.audited(self.name),
        }
        reply = impl.request(message, key=self.name, marshal=marshal)
        value = impl.result(reply, key=self.name)
        _apply_updates(marshal.wb, reply.get("updates"))
        for opt in optimizers:
            opt.sync()  # load_state_dict may change its hyperparameters
        if isinstance(value, RemoteObject) and self.name in REPLAYABLE:
            value.replay = (self, named)
        if self.name == "get_adamw_cls" and isinstance(value, RemoteObject):
            return RemoteOptimizerClass(value)
        return value


class RemoteObject:
    """An object that lives in the worker (a Tokenizer, a class...)."""

    def __init__(self, impl: Implementation, info: dict[str, Any], creator: str):
        self._impl = impl
        self._info = info
        self._id = int(info.get("id", -1))
        self._generation = impl.generation
        self._creator = creator
        self.replay: tuple[RemoteFunction, dict[str, Any]] | None = None
        weakref.finalize(self, impl.release, self._id, self._generation)

    @staticmethod
    def make(impl: Implementation, info: dict[str, Any], creator: str) -> "RemoteObject":
        cls = RemoteIterator if info.get("iterator") else RemoteObject
        return cls(impl, info, creator)

    @property
    def remote_type(self) -> str:
        return str(self._info.get("type", "?"))

    @property
    def remote_mro(self) -> list[str]:
        return [str(x) for x in self._info.get("mro") or []]

    def handle_id(self) -> int:
        """The handle's number in the current worker (rebuilt after a restart
        when it can be: a tokenizer is made again from the same arguments)."""
        if self._generation != self._impl.generation:
            if self.replay is None:
                raise WorkerFault(
                    Fault.CRASH,
                    f"crashed: this {self.remote_type} was lost when the worker was restarted after an earlier fault",
                )
            fresh = self.replay[0].impl_call(dict(self.replay[1]))
            self._id, self._generation, self._info = fresh._id, fresh._generation, fresh._info
            fresh._id = -1
        return self._id

    def _request(self, message: dict[str, Any], key: str, marshal: _Marshal | None = None) -> Any:
        impl = self._impl
        message = {**message, "h": self.handle_id(), "audit": impl.audited(key)}
        reply = impl.request(message, key=key, marshal=marshal)
        return impl.result(reply, key=key)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _RemoteMethod(self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._request({"op": "invoke", "args": list(args), "kwargs": kwargs}, f"{self._creator}()")

    def __repr__(self) -> str:
        return f"<remote {self.remote_type}>"


class _RemoteMethod:
    def __init__(self, owner: RemoteObject, name: str):
        self.owner, self.name = owner, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args_list = list(args)
        if self.name == "encode_iterable" and args_list:
            args_list[0] = _Pulled(self.owner._impl, args_list[0])
        key = f"{self.owner._creator}.{self.name}"
        result = self.owner._request({"op": "method", "name": self.name, "args": args_list, "kwargs": kwargs}, key)
        if isinstance(result, RemoteObject):
            result._creator = key
        return result


class RemoteIterator(RemoteObject):
    """An iterator in the worker (e.g. what encode_iterable returns), read
    in growing batches."""

    def __init__(self, impl: Implementation, info: dict[str, Any], creator: str):
        super().__init__(impl, info, creator)
        self._buffer: list[Any] = []
        self._done = False
        self._batch = 16

    def __iter__(self) -> "RemoteIterator":
        return self

    def __next__(self) -> Any:
        if not self._buffer:
            if self._done:
                raise StopIteration
            result = self._request({"op": "next", "n": self._batch}, f"{self._creator}()")
            if not isinstance(result, dict) or not isinstance(result.get("items"), list):
                raise WorkerFault(Fault.PROTOCOL, "protocol violation: bad iterator batch")
            self._buffer = list(reversed(result["items"]))
            self._done = bool(result.get("done"))
            self._batch = min(self._batch * 2, 4096)
            if not self._buffer:
                raise StopIteration
        return self._buffer.pop()

    def close(self) -> None:
        self._done, self._buffer = True, []


class RemoteOptimizerClass:
    """What ``get_adamw_cls()`` returns: calling it builds the optimizer in
    the worker over mirrors of the judge's parameters."""

    def __init__(self, remote: RemoteObject):
        self.remote = remote
        qualified = remote.remote_type
        self.__module__, _, self.__qualname__ = qualified.rpartition(".")
        self.__name__ = self.__qualname__.rsplit(".", 1)[-1]

    @property
    def mro_names(self) -> list[str]:
        return self.remote.remote_mro

    def __call__(self, params: Any, *args: Any, **kwargs: Any) -> "RemoteOptimizer":
        return RemoteOptimizer(self, params, args, kwargs)

    def __repr__(self) -> str:
        return f"<remote class {self.__module__}.{self.__qualname__}>"


class RemoteOptimizer:
    """An optimizer in the worker. ``param_groups`` lives here (the judge's
    parameters and hyperparameters; a schedule sets ``group["lr"]``);
    ``step()`` sends what changed, steps there, copies the new values into
    the judge's parameters."""

    def __init__(self, cls: RemoteOptimizerClass, params: Any, args: tuple, kwargs: dict[str, Any]):
        impl = cls.remote._impl
        self._impl, self._cls = impl, cls
        was_iterator = isinstance(params, Iterator)
        items = list(params)
        if items and isinstance(items[0], dict):
            groups = [dict(g, params=list(g["params"])) for g in items]
            sent: Any = [dict(g) for g in groups]
        else:
            groups = [{"params": items}]
            sent = _Materialized(iter(items)) if was_iterator else list(items)
        self._params = [p for g in groups for p in g["params"]]
        for p in self._params:
            impl.mirror_id(p, create=True)
        marshal = _Marshal(impl)
        key = f"{cls.remote._creator}()"
        reply = impl.request(
            {
                "op": "invoke",
                "h": cls.remote.handle_id(),
                "args": [sent, *args],
                "kwargs": kwargs,
                "audit": impl.audited(key),
            },
            key=key,
            marshal=marshal,
        )
        self._remote = impl.result(reply, key=key)
        if not isinstance(self._remote, RemoteObject):
            raise TypeError(f"the optimizer class returned {type(self._remote).__name__}, not an optimizer")
        self._remote._creator = "get_adamw_cls"
        self._groups_params = [g["params"] for g in groups]
        self.param_groups: list[dict[str, Any]] = [{"params": ps} for ps in self._groups_params]
        self._seen: list[dict[str, Any]] = [{} for _ in groups]
        self._exchange("sync")

    def _exchange(self, action: str) -> None:
        changes = []
        for group, seen in zip(self.param_groups, self._seen):
            changes.append({k: v for k, v in group.items() if k != "params" and (k not in seen or seen[k] != v)})
        key = f"get_adamw_cls.{action}"
        marshal = _Marshal(self._impl)
        result = self._remote._request(
            {"op": "optimizer", "action": action, "groups": changes, "params": self._params}, key, marshal
        )
        if not isinstance(result, dict) or len(result.get("params") or []) != len(self._params):
            raise WorkerFault(Fault.PROTOCOL, "protocol violation: bad optimizer reply")
        with torch.no_grad():
            for p, value in zip(self._params, result["params"]):
                if isinstance(value, torch.Tensor) and value.shape == p.shape:
                    p.copy_(value)
        for group, hyper in zip(self.param_groups, result.get("groups") or []):
            if isinstance(hyper, dict):
                group.update(hyper)
        self._seen = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]

    def sync(self) -> None:
        self._exchange("sync")

    def step(self, closure: Any = None) -> None:
        if closure is not None:
            raise NotImplementedError("lmspec's optimizer proxy does not forward closures")
        self._exchange("step")

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        self.sync()
        return self._remote._request(
            {"op": "method", "name": "state_dict", "args": [], "kwargs": {}}, "get_adamw_cls.state_dict"
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._remote._request(
            {"op": "method", "name": "load_state_dict", "args": [state], "kwargs": {}}, "get_adamw_cls.load_state_dict"
        )
        self._seen = [{} for _ in self.param_groups]
        for group in self.param_groups:
            for k in [k for k in group if k != "params"]:
                del group[k]
        self.sync()

    def handle_id(self) -> int:
        return self._remote.handle_id()

    def __repr__(self) -> str:
        return f"<remote optimizer {self._cls.__module__}.{self._cls.__qualname__}>"
