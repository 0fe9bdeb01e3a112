"""Objects that stand for the implementation's in the judge: the adapter
functions (RemoteFunction, called as the curriculum's own tests call them),
objects living in the worker (RemoteObject: a Tokenizer, a class;
RemoteIterator), an optimizer class and its instances (RemoteOptimizerClass,
RemoteOptimizer). Every call goes through Implementation.request with the
hooks of conformance/judge/marshal.py.
"""

import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from lmspec.conformance.judge.faults import Fault, WorkerFault
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.judge.marshal import Handle, Marshal, Materialized, Pulled, apply_updates, lazy, prepare
from lmspec.conformance.judge.worker.protocol import ProtocolError, Tagged


def decode_hook(impl: Implementation, creator: str) -> Callable[[Tagged], Any]:
    """How the judge rebuilds the tagged values of a reply: handles become
    remote objects; paths, dtypes and devices their judge-side values."""

    def hook(t: Tagged) -> Any:
        if t.kind == "handle":
            return RemoteObject.make(impl, dict(t), creator=creator)
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


def call(impl: Implementation, message: dict[str, Any], key: str, marshal: Marshal | None = None) -> Any:
    """One request of a remote object or function, and its value."""
    __tracebackhide__ = True
    marshal = marshal if marshal is not None else Marshal(impl)
    reply = impl.request(message, key=key, encode_hook=marshal.hook, decode_hook=decode_hook(impl, key.split(".")[0]))
    value = impl.result(reply, key=key)
    apply_updates(marshal.wb, reply.get("updates"))
    return value


class RemoteFunction:
    """An adapter function of the implementation, called as the official
    tests call it."""

    def __init__(self, impl: Implementation, name: str):
        self.impl = impl
        self.function = impl.functions[name]
        self.name = self.__name__ = self.__qualname__ = name
        self.__signature__ = self.function.signature()

    @property
    def last_mutations(self) -> list[str]:
        """How the last call changed its arguments (in the worker's copy)."""
        return self.impl.last_mutations

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        return self.impl_call(self._named(args, kwargs))

    def repeat(self, n: int, *args: Any, **kwargs: Any) -> list[Any]:
        """What ``n`` calls with these arguments, one after the other, return, in one round trip
        to the worker: each call gets its own copies of the arguments, except those the interface
        writes back (a torch.Generator: each call draws from it where the previous one left it,
        and its state comes back after the last); the per-call time limit holds for each call."""
        __tracebackhide__ = True
        return self.impl_call(self._named(args, kwargs), repeat=n)

    def _named(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = self.__signature__.bind(*args, **kwargs)
        if self.function.explicit_defaults:
            bound.apply_defaults()  # the curriculum's tests always pass these
        return dict(bound.arguments)

    def impl_call(self, named: dict[str, Any], repeat: int | None = None) -> Any:
        __tracebackhide__ = True
        impl = self.impl
        prepared, writeback = prepare(self.function, named)
        names = list(self.__signature__.parameters)
        args = [prepared.pop(n) for n in names[: self.function.positional] if n in prepared]
        marshal = Marshal(impl, writeback)
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
        if repeat is not None:
            message["repeat"] = repeat
        value = call(impl, message, self.name, marshal)
        for opt in optimizers:
            opt.sync()  # load_state_dict may change its hyperparameters
        if isinstance(value, RemoteObject) and self.function.replayable:
            value.replay = (self, named)
        if self.function.returns == "optimizer class" and isinstance(value, RemoteObject):
            return RemoteOptimizerClass(value)
        return value


class RemoteObject(Handle):
    """An object that lives in the worker (a Tokenizer, a class...)."""

    def __init__(self, impl: Implementation, info: dict[str, Any], creator: str):
        self._impl = impl
        self._info = info
        self._id = int(info.get("id", -1))
        self._generation = impl.generation
        self._creator = creator
        self.replay: tuple[RemoteFunction, dict[str, Any]] | None = None
        weakref.finalize(self, impl.handles.release, self._id, self._generation)

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

    def _request(self, message: dict[str, Any], key: str, marshal: Marshal | None = None) -> Any:
        __tracebackhide__ = True
        impl = self._impl
        return call(impl, {**message, "h": self.handle_id(), "audit": impl.audited(key)}, key, marshal)

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
        args_list = [Pulled(self.owner._impl, a) if lazy(a) else a for a in args]
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


class RemoteOptimizer(Handle):
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
            sent = Materialized(iter(items)) if was_iterator else list(items)
        self._params = [p for g in groups for p in g["params"]]
        for p in self._params:
            impl.mirrors.id_of(p, create=True)
        key = f"{cls.remote._creator}()"
        message = {"op": "invoke", "h": cls.remote.handle_id(), "args": [sent, *args], "kwargs": kwargs}
        self._remote = call(impl, {**message, "audit": impl.audited(key)}, key)
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
        result = self._remote._request(
            {"op": "optimizer", "action": action, "groups": changes, "params": self._params}, key
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
