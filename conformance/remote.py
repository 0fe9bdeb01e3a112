"""Objects that stand for the implementation's in the judge: the adapter
functions (RemoteFunction), objects living in the worker (RemoteObject: a
Tokenizer, a class; RemoteIterator), the optimizer class and its instances
(RemoteOptimizerClass, RemoteOptimizer), and the encoding of the judge's own
objects for a request (_Marshal: parameters, modules, optimizers, generators,
files, memmaps, iterables) with the write-backs the interface defines.
conformance/proxy.py holds the worker connection they all go through.
"""

import errno
import io
import itertools
import os
import weakref
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch

from lmspec.conformance.adapter import CALL_STYLE, FILE_ARGS, REPLAYABLE, WRITEBACK_ARGS, signature
from lmspec.conformance.outcomes import Fault
from lmspec.conformance.proxy import Implementation, WorkerFault
from lmspec.tools.worker.protocol import ProtocolError, Tagged


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
        __tracebackhide__ = True
        bound = self.__signature__.bind(*args, **kwargs)
        named = dict(bound.arguments)
        if self.name == "get_tokenizer":
            named.setdefault("special_tokens", None)  # the official tests always pass it
        return self.impl_call(named)

    def impl_call(self, named: dict[str, Any]) -> Any:
        __tracebackhide__ = True
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
        __tracebackhide__ = True
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
