"""The worker: serves the judge's calls into the implementation under test.

Requests (judge -> worker) and replies are dicts in the wire format of
protocol.py. Every argument arrives as a fresh copy (decoded from bytes), so
the implementation can neither corrupt the judge's oracles nor be hurt by a
judge that reuses its inputs. Objects that stay here between calls (a
Tokenizer, an optimizer, a generator returned by encode_iterable) are kept in
a handle table; the judge refers to them by number.

Ops:
  call      {fn, args, kwargs, audit}        an adapter function
            {..., repeat: n}                 n calls in a row, each with fresh copies of
                                             the arguments (written-back objects shared:
                                             a generator is drawn from by each in turn);
                                             a list of n results. Before each call after
                                             the first, a {"tick": k} frame (no answer):
                                             the judge's per-call limit starts again
  invoke    {h, args, kwargs, audit}         call a handle (a class, a callable)
  method    {h, name, args, kwargs, audit}   call a method of a handle
  next      {h, n, audit}                    up to n items of an iterator handle
  optimizer {h, params, groups, audit}       sync an optimizer's parameters and
                                             hyperparameters from the judge, step
  (any)     {release: [ids], forget: [rids]} also drop these handles and
                                             parameter mirrors first
  modules   {}                               modules imported so far
Replies: {"ok": value, "updates": {wb: ...}, "mutated": [...], "audit": [...]}
or {"err": {type, module, bases, message, traceback, not_implemented}}.

While a call runs, the worker may ask the judge for the next items of an
iterable the judge passed (``{"pull": id, "n": n}``); the judge answers
``{"ok": [...], "done": bool}`` or ``{"err": ...}``.

Write-back: objects the judge marks with a ``wb`` number (the parameters of
gradient clipping, the model and optimizer of load_checkpoint, a file
save_checkpoint writes, a torch.Generator a sampler advances) come back as
``updates`` so the judge applies the in-place effects the interface defines.
Any other argument the implementation changes is reported in ``mutated``
(a STRICT finding) and never copied back.
"""

import io
import itertools
import os
import pathlib
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .protocol import ProtocolError, Tagged

_WORKER_DIR = os.path.dirname(os.path.abspath(__file__))
#: Items per pull from a judge-side iterable and per ``next`` batch cap.
PULL_BATCH = 256
MAX_NEXT = 8192
#: Most calls one ``repeat`` request may ask for.
MAX_REPEAT = 10_000


class JudgeIterableError(Exception):
    """The judge's iterable raised while the implementation consumed it."""

    def __init__(self, ident: int, description: str):
        super().__init__(description)
        self.ident = ident


class _MirrorModule(torch.nn.Module):
    """A module with the judge's parameter and buffer names (no forward):
    what save/load_checkpoint see of the judge's model."""


class _StandInOptimizer(torch.optim.Optimizer):
    """An optimizer of the judge's that is not a torch.optim class: its
    param_groups and state_dict, for the checkpoint functions to save/load."""

    def __init__(self, groups: list[dict[str, Any]]):
        super().__init__(groups, {})

    def step(self, closure: Any = None) -> None:  # pragma: no cover - never stepped here
        raise RuntimeError("this optimizer stands in for one of the judge's and cannot step")


#: Tagged kinds the worker may change in place and send back (their ``wb`` number).
_WRITABLE = frozenset({"param", "module", "optimizer", "generator", "bytesio"})


class Server:
    def __init__(
        self,
        module: Any,
        root: Path | None,
        scratch: Path,
        pull: Callable[[int, int], tuple[list, bool]],
        tick: Callable[[int], None] = lambda k: None,
    ):
        self.module = module
        self.root = root
        self.scratch = scratch
        self.pull = pull  # asks the judge for items of one of its iterables
        self.tick = tick  # tells the judge that call k of a repeat request starts
        self.handles: dict[int, Any] = {}
        self.mirrors: dict[int, torch.nn.Parameter] = {}  # rid -> parameter mirrored from the judge
        self.sent_grads: dict[int, torch.Tensor | None] = {}  # id(param) -> the grad the judge sent
        self._ids = itertools.count(1)
        self._files = itertools.count(1)

    # --- decoding the judge's tagged objects --------------------------------------------
    def decoder(self) -> tuple[Callable[[Tagged], Any], dict[int, tuple[str, Any]]]:
        """A decode hook for one request, and the write-back table it fills
        (wb number -> (kind, object))."""
        memo: dict[int, torch.nn.Parameter] = {}
        writeback: dict[int, tuple[str, Any]] = {}
        self.sent_grads = {}

        def hook(t: Tagged) -> Any:
            kind = t.kind
            if kind in _WRITABLE:
                p = self._writable(t, memo)
                if "wb" in t:
                    writeback[_int(t, "wb")] = (kind, p)
                return p
            if kind == "outfile":
                path = self._scratch_file(str(t.get("name", "file")))
                if "wb" in t:
                    writeback[_int(t, "wb")] = ("outfile", path)
                return path if t.get("as") == "path" else str(path)
            return self._value(t, memo)

        return hook, writeback

    def _writable(self, t: Tagged, memo: dict[int, torch.nn.Parameter]) -> Any:
        """An object whose in-place changes can go back to the judge (its ``wb`` number)."""
        kind = t.kind
        if kind == "param":
            return self._param(t, memo)
        if kind == "module":
            return self._module(t)
        if kind == "optimizer":
            return self._optimizer(t)
        if kind == "generator":
            generator = torch.Generator(device=str(t.get("device", "cpu")))
            generator.set_state(_tensor(t, "state"))
            return generator
        buffer = io.BytesIO(_bytes(t, "data"))  # "bytesio"
        buffer.seek(_int(t, "pos"))
        return buffer

    def _value(self, t: Tagged, memo: dict[int, torch.nn.Parameter]) -> Any:
        """A tagged object that never goes back: references, files in, iterables, names."""
        kind = t.kind
        if kind == "ref":
            p = memo.get(_int(t, "memo"))
            if p is None:
                raise ProtocolError("reference to an unknown parameter")
            return p
        if kind == "handle":
            ident = _int(t, "id")
            if ident not in self.handles:
                raise ProtocolError(f"unknown handle {ident} (released, or the worker was restarted)")
            return self.handles[ident]
        if kind == "infile":
            path = self._scratch_file(str(t.get("name", "file")))
            path.write_bytes(_bytes(t, "data"))
            return path if t.get("as") == "path" else str(path)
        if kind == "memmap":
            return self._memmap(t)
        if kind == "path":
            return pathlib.Path(str(t.get("path")))
        if kind == "iterable":
            items = t.get("items")
            if not isinstance(items, list):
                raise ProtocolError("iterable items must be a list")
            return (x for x in items) if t.get("as") == "generator" else iter(items)
        if kind == "pull":
            return self._pulled(_int(t, "id"))
        if kind == "dtype":
            dtype = getattr(torch, str(t.get("name")), None)
            if not isinstance(dtype, torch.dtype):
                raise ProtocolError(f"unknown dtype {t.get('name')!r}")
            return dtype
        if kind == "device":
            return torch.device(str(t.get("name")))
        raise ProtocolError(f"unknown tagged kind {kind!r}")

    def _param(self, t: Tagged, memo: dict[int, torch.nn.Parameter]) -> torch.nn.Parameter:
        data = _tensor(t, "data")
        grad = t.get("grad")
        rid = t.get("rid")
        requires_grad = bool(t.get("requires_grad", True)) and data.is_floating_point()
        p = self.mirrors.get(rid) if isinstance(rid, int) else None
        if p is not None and p.shape == data.shape and p.dtype == data.dtype and p.device == data.device:
            with torch.no_grad():
                p.data.copy_(data)
            p.requires_grad_(requires_grad)
        else:
            p = torch.nn.Parameter(data, requires_grad=requires_grad)
            if isinstance(rid, int):
                self.mirrors[rid] = p
        if grad is not None and not isinstance(grad, torch.Tensor):
            raise ProtocolError("param grad must be a tensor")
        p.grad = grad
        self.sent_grads[id(p)] = grad
        if "memo" in t:
            memo[_int(t, "memo")] = p
        return p

    def _module(self, t: Tagged) -> torch.nn.Module:
        m = _MirrorModule()
        for name, child in (t.get("children") or {}).items():
            m.add_module(str(name), child)
        for name, p in (t.get("params") or {}).items():
            m.register_parameter(str(name), p)
        transient = set(t.get("nonpersistent") or [])
        for name, b in (t.get("buffers") or {}).items():
            m.register_buffer(str(name), b, persistent=name not in transient)
        return m

    def _optimizer(self, t: Tagged) -> torch.optim.Optimizer:
        groups = t.get("groups")
        if not isinstance(groups, list) or not groups:
            raise ProtocolError("optimizer groups must be a non-empty list")
        cls_name = str(t.get("cls", ""))
        cls = getattr(torch.optim, cls_name.removeprefix("torch.optim."), None)
        if cls_name.startswith("torch.optim.") and isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer):
            opt = cls(groups)
        else:
            opt = _StandInOptimizer(groups)
        state = t.get("state")
        if state is not None:
            opt.load_state_dict(state)
        return opt

    def _scratch_file(self, name: str) -> Path:
        folder = self.scratch / "files" / str(next(self._files))
        folder.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(name).name) or "file"
        return folder / safe

    def _memmap(self, t: Tagged) -> np.memmap:
        path = self._scratch_file(str(t.get("name", "data.bin")))
        size = _int(t, "size")
        with open(path, "wb") as f:
            f.truncate(size)  # sparse: the holes cost nothing
            for offset, chunk in t.get("segments") or []:
                if not isinstance(offset, int) or not isinstance(chunk, bytes) or offset + len(chunk) > size:
                    raise ProtocolError("bad memmap segment")
                f.seek(offset)
                f.write(chunk)
        shape = tuple(int(s) for s in t.get("shape") or ())
        order = "F" if t.get("order") == "F" else "C"
        return np.memmap(
            path, dtype=np.dtype(str(t.get("dtype"))), mode="r", offset=_int(t, "offset"), shape=shape, order=order
        )

    def _pulled(self, ident: int) -> Iterator[Any]:
        """An iterator over a judge-side iterable, fetched in batches."""
        done = False
        while not done:
            items, done = self.pull(ident, PULL_BATCH)
            yield from items

    # --- encoding results -----------------------------------------------------------------
    def encode_hook(self, obj: Any) -> Any:
        """Results that are not plain data stay here as handles."""
        if isinstance(obj, torch.Tensor | np.ndarray | tuple | Tagged):
            return obj
        if isinstance(obj, (pathlib.PurePath)):
            return Tagged("path", path=str(obj))
        if isinstance(obj, torch.dtype):
            return Tagged("dtype", name=str(obj).removeprefix("torch."))
        if isinstance(obj, torch.device):
            return Tagged("device", name=str(obj))
        if isinstance(obj, (int, float, str, bytes, dict, list, np.generic, bytearray, memoryview)):
            return obj
        return self.new_handle(obj)

    def new_handle(self, obj: Any) -> Tagged:
        ident = next(self._ids)
        self.handles[ident] = obj
        cls = obj if isinstance(obj, type) else type(obj)
        return Tagged(
            "handle",
            id=ident,
            type=f"{cls.__module__}.{cls.__qualname__}",
            is_class=isinstance(obj, type),
            callable=callable(obj),
            iterator=isinstance(obj, Iterator),
            mro=[f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__],
        )

    # --- running one request ----------------------------------------------------------------
    def run(self, request: dict[str, Any], writeback: dict[int, tuple[str, Any]]) -> dict[str, Any]:
        reply = self._run(request, writeback)
        reply["seq"] = request.get("seq")  # the judge matches replies to requests
        return reply

    def _run(self, request: dict[str, Any], writeback: dict[int, tuple[str, Any]]) -> dict[str, Any]:
        op = request.get("op")
        for ident in request.get("release") or []:  # handles the judge dropped since the last request
            self.handles.pop(ident, None)
        for rid in request.get("forget") or []:  # parameters the judge dropped: their mirrors go too
            self.mirrors.pop(rid, None)
        if op == "modules":
            from .loader import WATCH

            return {"ok": {"modules": _modules(), "attempts": list(WATCH.attempts)}}
        target, what = self._target(request)
        args = request.get("args") or []
        kwargs = request.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ProtocolError("args must be a list and kwargs a dict")
        names = request.get("names") if isinstance(request.get("names"), list) else []
        before = _snapshot(args, kwargs, writeback, names) if op == "call" else None
        recorder = None
        if request.get("audit"):
            from .audit import Recorder

            recorder = Recorder(self.root)
        try:
            if recorder is not None:
                with recorder:
                    result = self._invoke(op, target, args, kwargs, request, writeback)
            else:
                result = self._invoke(op, target, args, kwargs, request, writeback)
        except BaseException as exc:
            return {"err": describe(exc, what), "audit": recorder.findings if recorder else []}
        reply: dict[str, Any] = {"ok": result}
        if writeback:
            reply["updates"] = _updates(writeback, self.sent_grads)
        if before is not None:
            reply["mutated"] = _mutations(before, args, kwargs)
        if recorder is not None:
            reply["audit"] = recorder.findings
        return reply

    def _target(self, request: dict[str, Any]) -> tuple[Any, str]:
        op = request.get("op")
        if op == "call":
            name = str(request.get("fn"))
            fn = getattr(self.module, name, None)
            if not callable(fn):
                raise ProtocolError(f"the adapter has no function {name}")
            return fn, name
        handle = request.get("h")
        if handle not in self.handles:
            raise ProtocolError(f"unknown handle {handle!r} (released, or the worker was restarted)")
        obj = self.handles[handle]
        if op == "method":
            name = str(request.get("name"))
            if name.startswith("__") and name not in ("__call__", "__iter__", "__len__"):
                raise ProtocolError(f"method {name} may not be called remotely")

            def method(*args: Any, **kwargs: Any) -> Any:
                # looked up inside the call: a missing method is the implementation's AttributeError
                return getattr(obj, name)(*args, **kwargs)

            return method, f"{type(obj).__name__}.{name}"
        if op in ("invoke", "next", "optimizer"):
            return obj, type(obj).__name__
        raise ProtocolError(f"unknown op {op!r}")

    def _invoke(self, op: str, target: Any, args: list, kwargs: dict, request: dict[str, Any], writeback: dict) -> Any:
        if op == "call" and "repeat" in request:
            return self._repeat(target, args, kwargs, _int(request, "repeat"), writeback)
        if op == "next":
            n = max(1, min(int(request.get("n") or 1), MAX_NEXT))
            items = list(itertools.islice(target, n))
            return {"items": items, "done": len(items) < n}
        if op == "optimizer":
            return self._step(target, request)
        return target(*args, **kwargs)

    def _repeat(self, fn: Callable, args: list, kwargs: dict, n: int, writeback: dict) -> list:
        """``n`` calls of ``fn``, as ``n`` requests would make them: the first with the decoded
        arguments (the ones checked for mutation), each later one with fresh copies of them taken
        before the first; objects written back (a generator) are the same object in every call."""
        if not 1 <= n <= MAX_REPEAT:
            raise ProtocolError(f"repeat must be 1 to {MAX_REPEAT}")
        shared = {id(obj) for _, obj in writeback.values()}
        pristine = _fresh((args, kwargs), shared)
        results = [fn(*args, **kwargs)]
        for k in range(1, n):
            self.tick(k)
            again_args, again_kwargs = _fresh(pristine, shared)
            results.append(fn(*again_args, **again_kwargs))
        return results

    def _step(self, opt: torch.optim.Optimizer, request: dict[str, Any]) -> dict[str, Any]:
        """Hyperparameters the judge changed go into the groups (a schedule
        sets group["lr"]); then one step; the new parameter values go back."""
        changes = request.get("groups") or []
        if len(changes) != len(opt.param_groups):
            raise ProtocolError("optimizer group count changed")
        for group, changed in zip(opt.param_groups, changes):
            group.update(changed)
        if request.get("action") == "step":
            opt.step()
        params = request.get("params") or []
        return {
            "params": [p.detach() for p in params],
            "groups": [_hyper(g) for g in opt.param_groups],
        }


# --- helpers -----------------------------------------------------------------------------
def _int(t: dict, key: str) -> int:
    value = t.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"{key} must be an int")
    return value


def _bytes(t: dict, key: str) -> bytes:
    value = t.get(key)
    if not isinstance(value, bytes):
        raise ProtocolError(f"{key} must be bytes")
    return value


def _tensor(t: dict, key: str) -> torch.Tensor:
    value = t.get(key)
    if not isinstance(value, torch.Tensor):
        raise ProtocolError(f"{key} must be a tensor")
    return value


def _hyper(group: dict[str, Any]) -> dict[str, Any]:
    """A param group's plain-valued hyperparameters (what the judge mirrors)."""
    out = {}
    for key, value in group.items():
        if key == "params":
            continue
        if isinstance(value, bool | int | float | str | type(None)) or (
            isinstance(value, tuple | list) and all(isinstance(v, int | float) for v in value)
        ):
            out[key] = value
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            out[key] = value.item()
    return out


def _modules() -> list[list[str]]:
    out = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and not path.startswith(_WORKER_DIR):
            out.append([name, path])
    return out


def _updates(writeback: dict[int, tuple[str, Any]], sent_grads: dict[int, Any]) -> dict[int, Any]:
    updates: dict[int, Any] = {}
    for wb, (kind, obj) in writeback.items():
        if kind == "param":
            grad = obj.grad
            updates[wb] = {
                "data": obj.detach(),
                "grad": None if grad is None else grad.detach(),
                # the tensor the judge sent is still p.grad (changed in place or not)
                "grad_kept": grad is not None and grad is sent_grads.get(id(obj)),
            }
        elif kind == "module":
            updates[wb] = {"state": {k: v.detach() for k, v in obj.state_dict(keep_vars=True).items()}}
        elif kind == "optimizer":
            updates[wb] = {"state": obj.state_dict()}
        elif kind == "generator":
            updates[wb] = {"state": obj.get_state()}
        elif kind == "bytesio":
            updates[wb] = {"data": obj.getvalue(), "pos": obj.tell()}
        elif kind == "outfile":
            updates[wb] = {"data": obj.read_bytes() if obj.is_file() else None}
    return updates


def _fresh(value: Any, shared: set[int]) -> Any:
    """A copy of decoded arguments for another call: tensors, arrays and containers anew, the
    objects in ``shared`` and everything else (handles, numbers, strings) as they are."""
    if id(value) in shared:
        return value
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        return (
            torch.nn.Parameter(copy, requires_grad=value.requires_grad)
            if isinstance(value, torch.nn.Parameter)
            else copy.requires_grad_(value.requires_grad)
        )
    if isinstance(value, np.ndarray) and not isinstance(value, np.memmap):
        return value.copy()
    if isinstance(value, dict):
        return {k: _fresh(v, shared) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_fresh(v, shared) for v in value)
    return value


# --- mutation of arguments (a STRICT finding) --------------------------------------------
def _copy(value: Any, depth: int = 0) -> Any:
    if depth > 8:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray) and not isinstance(value, np.memmap):
        return value.copy()
    if isinstance(value, dict):
        return {k: _copy(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v, depth + 1) for v in value]
    if isinstance(value, str | bytes | int | float | bool | type(None)):
        return value
    return None  # handles, modules, files: not compared


def _snapshot(args: list, kwargs: dict, writeback: dict[int, tuple[str, Any]], names: list) -> dict[str, Any]:
    skip = {id(obj) for _, obj in writeback.values()}
    labels = [str(names[i]) if i < len(names) else f"argument {i}" for i in range(len(args))]
    named = dict(zip(labels, args)) | dict(kwargs)
    return {name: (value, _copy(value)) for name, value in named.items() if id(value) not in skip}


def _changed(now: Any, then: Any, depth: int = 0) -> str | None:
    if then is None or depth > 8:
        return None
    if isinstance(now, torch.Tensor):
        if not isinstance(then, torch.Tensor):
            return None
        if now.shape != then.shape or now.dtype != then.dtype:
            return f"tensor changed to {now.dtype} {tuple(now.shape)}"
        return None if torch.equal(now.detach(), then) or _both_nan(now, then) else "tensor values changed in place"
    if isinstance(now, np.ndarray):
        return None if np.array_equal(now, then, equal_nan=now.dtype.kind == "f") else "array values changed in place"
    if isinstance(now, dict):
        if not isinstance(then, dict):
            return None
        if set(now) != set(then):
            gone = [repr(k) for k in then if k not in now][:3]
            added = [repr(k) for k in now if k not in then][:3]
            parts = ([f"keys removed: {', '.join(gone)}"] if gone else []) + (
                [f"keys added: {', '.join(added)}"] if added else []
            )
            return "dict " + "; ".join(parts)
        for k in now:
            why = _changed(now[k], then[k], depth + 1)
            if why:
                return f"[{k!r}]: {why}"
        return None
    if isinstance(now, list):
        if not isinstance(then, list):
            return None
        if len(now) != len(then):
            return f"list length {len(then)} -> {len(now)}"
        for i, (a, b) in enumerate(zip(now, then)):
            why = _changed(a, b, depth + 1)
            if why:
                return f"[{i}]: {why}"
    return None


def _both_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(
        a.is_floating_point() and torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    )


def _mutations(before: dict[str, Any], args: list, kwargs: dict) -> list[str]:
    found = []
    for name, (value, copied) in before.items():
        why = _changed(value, copied)
        if why:
            found.append(f"{name}: {why}")
    return found


# --- exceptions ----------------------------------------------------------------------------
def describe(exc: BaseException, what: str) -> dict[str, Any]:
    """An exception as data: type, builtin bases, message, and the traceback
    without this worker's own frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_WORKER_DIR):
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    bases = [c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins"]
    out = {
        "type": type(exc).__qualname__,
        "module": type(exc).__module__,
        "bases": bases,
        "message": _safe_str(exc)[:4000],
        "traceback": "".join(lines)[-8000:],
        "not_implemented": isinstance(exc, NotImplementedError),
        "in": what,
    }
    if isinstance(exc, JudgeIterableError):
        out["judge_iterable"] = exc.ident
    return out


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a hostile __str__
        return f"<{type(exc).__name__} whose str() failed>"
