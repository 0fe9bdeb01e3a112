"""Encoding the judge's objects for a request, and applying what comes back.

``Marshal`` turns the arguments of one request into wire values: parameters
(memoized, so a tied or shared parameter stays one object; numbered when an
optimizer in the worker mirrors them), modules, optimizers, generators,
files, memmaps, iterables, and handles of objects that live in the worker;
it marks the arguments whose in-place effects the interface defines
(write-backs). ``apply_updates`` applies those effects to the judge's
objects. ``prepare`` turns path arguments into files and iterators into
their items, as a profile's Function record says.
"""

import errno
import io
import itertools
import os
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lmspec.conformance.judge.worker.protocol import ProtocolError, Tagged

if TYPE_CHECKING:
    from lmspec.conformance.judge.implementation import Implementation
    from lmspec.conformance.profiles import Function


class Handle:
    """An object that stands for one living in the worker: it travels as its
    handle number."""

    def handle_id(self) -> int:
        raise NotImplementedError


class Marshal:
    """Encodes the judge's objects for one request: parameters (memoized, so
    a tied or shared parameter stays one object; mirrored when an optimizer
    in the worker holds them), modules, optimizers, generators, files,
    memmaps, iterables; marks the write-back ones."""

    def __init__(self, impl: "Implementation", writeback: tuple[Any, ...] = ()):
        self.impl = impl
        self.memo: dict[int, int] = {}
        self.wb_ids: set[int] = set()
        self.wb: list[Any] = []
        self.keep: list[Any] = []  # keeps converted temporaries alive while encoding
        for obj in writeback:
            self._mark(obj)

    def _mark(self, obj: Any) -> None:
        if isinstance(obj, Materialized):
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
        if isinstance(obj, Handle):
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
        if isinstance(obj, _InFile | _OutFile | Materialized | Pulled):
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
        rid = self.impl.mirrors.id_of(p, create=False)
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


class Materialized:
    """A judge-side iterator/generator argument (e.g. parameters for
    clipping), sent as its items and given to the implementation as a
    generator again."""

    def __init__(self, iterable: Iterator[Any]):
        self.items = list(itertools.islice(iterable, 1_000_001))
        if len(self.items) > 1_000_000:
            raise ProtocolError("an iterable argument of over a million items")

    def tagged(self) -> Tagged:
        return Tagged("iterable", items=self.items, **{"as": "generator"})


class Pulled:
    """A judge-side iterable the implementation consumes lazily (encode_iterable)."""

    def __init__(self, impl: "Implementation", iterable: Any):
        self.ident = impl.pulls.register(iterable)

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


def apply_updates(wb: list[Any], updates: Any) -> None:
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


def prepare(function: "Function", kwargs: dict[str, Any]) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """Arguments as they travel: file paths as files, iterators as their
    items; and the write-back objects among them."""
    out = dict(kwargs)
    for arg, direction in function.files.items():
        value = out.get(arg)
        if isinstance(value, str | PurePath):
            out[arg] = _InFile(value) if direction == "in" else _OutFile(value)
    for arg, value in out.items():
        if isinstance(value, Iterator) and not isinstance(value, io.IOBase):
            out[arg] = Materialized(value)
    writeback = tuple(out[a] for a in function.writeback if a in out)
    return out, writeback


def lazy(value: Any) -> bool:
    """A method argument the implementation should consume lazily (pulled
    from the judge a batch at a time): an iterator or a file, not a container."""
    return isinstance(value, Iterator | io.IOBase)
