"""The wire format between the judge (trusted) and the worker (untrusted).

A message is one *frame*: a 4-byte big-endian length, then that many bytes of
MessagePack. MessagePack carries plain data (None, bool, int, float, str,
bytes, list, dict with any hashable keys) and, for everything else, *ext*
values whose payload is itself a MessagePack value:

    ext 1  tuple            [items...]
    ext 2  tensor           [dtype, shape, device, flags, data]: torch's dtype
                            name, the shape, the device it was on, 1 for a
                            Parameter + 2 for requires_grad, the raw bytes
                            (little-endian, as this machine's tensors are)
    ext 3  ndarray          safetensors bytes of one numpy array named "t"
    ext 5  tagged object    {"kind": str, ...}: a judge- or worker-side object
                            that is not plain data (a torch.Generator, a
                            module, an optimizer, a file, a remote handle...)

Why these two formats. MessagePack: binary, so vocabularies of bytes travel
as bytes (JSON would need base64 and its own tags anyway); tuple vs list and
int dict keys survive through ext/raw keys; decoding builds only plain Python
values (no code runs: unlike pickle, which the judge never unpickles from a
worker); size limits are enforced by the frame length. A tensor's bytes
travel raw beside its dtype and shape, and the decoder checks that they are
exactly shape x dtype bytes of an accepted dtype before it builds anything
(bfloat16 included, which numpy cannot hold); a tensor once travelled as a
safetensors file of its own, whose header and checks cost 0.1-0.3 ms a
tensor (a sampling test sent 12,000: BENCHMARKS.md section 12). numpy
arrays still do (safetensors' numpy format: the dtype and bounds checks of
its Rust parser).

Both sides validate what they decode: unknown ext codes, unknown tagged
kinds, bad dtypes and nesting deeper than MAX_DEPTH are protocol errors.
What a frame may make the decoder build is bounded before it is built, not
only by the frame's length (a frame of 48 MB of empty arrays once grew the
judge to 3.6 GiB): per frame, at most MAX_ITEMS container elements (list
items, and map entries counted twice: key and value), MAX_EXT non-plain
values (tuples, tagged objects, tensors, arrays) and MAX_ARRAYS tensors and
arrays; no single list or map is announced longer than MAX_ITEMS. The
largest real frames (a GPT-2 vocabulary and its merges) hold about 250,000
elements and 50,000 tuples.
This module imports nothing from lmspec: the worker runs it from a
read-only copy inside the sandbox.
"""

import os
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.numpy import load as _np_load
from safetensors.numpy import save as _np_save

from .frames import MAX_FRAME, ProtocolError, read_frame, write_frame

__all__ = [
    "MAX_ARRAYS",
    "MAX_DEPTH",
    "MAX_EXT",
    "MAX_FRAME",
    "MAX_ITEMS",
    "ProtocolError",
    "Tagged",
    "decode",
    "encode",
    "read_frame",
    "write_frame",
]

MAX_DEPTH = 64
#: Per frame: container elements, non-plain values, tensors and arrays (module docstring).
MAX_ITEMS = int(os.environ.get("LMSPEC_MAX_ITEMS", 2_000_000))
MAX_EXT = int(os.environ.get("LMSPEC_MAX_EXT", 400_000))
MAX_ARRAYS = int(os.environ.get("LMSPEC_MAX_ARRAYS", 20_000))

EXT_TUPLE, EXT_TENSOR, EXT_NDARRAY, EXT_TAGGED = 1, 2, 3, 5


class Tagged(dict):
    """A tagged object on the wire: ``Tagged(kind, **fields)``. The encoder
    and the decoder hooks of each side decide what a kind becomes."""

    def __init__(self, kind: str, **fields: Any):
        super().__init__(fields)
        self.kind = kind

    def __repr__(self) -> str:
        return f"Tagged({self.kind!r}, {dict.__repr__(self)})"


# --- values -----------------------------------------------------------------------------
_PARAM, _REQUIRES_GRAD = 1, 2


def _tensor_bytes(t: torch.Tensor) -> bytes:
    plain = t.detach()
    flags = (_PARAM if isinstance(t, torch.nn.Parameter) else 0) | (_REQUIRES_GRAD if t.requires_grad else 0)
    if type(plain) is not torch.Tensor:  # subclasses travel as plain tensors
        plain = plain.as_subclass(torch.Tensor)
    device = str(plain.device)
    data = plain.to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return msgpack.packb([str(plain.dtype).removeprefix("torch."), list(plain.shape), device, flags, data])


def _native(obj: Any) -> Any:
    """What MessagePack packs for ``obj`` (an ExtType for the non-plain kinds)."""
    if isinstance(obj, Tagged):
        return msgpack.ExtType(EXT_TAGGED, _pack({"kind": obj.kind, **obj}, None))
    if isinstance(obj, tuple):
        return msgpack.ExtType(EXT_TUPLE, _pack(list(obj), None))
    if isinstance(obj, torch.Tensor):
        return msgpack.ExtType(EXT_TENSOR, _tensor_bytes(obj))
    if isinstance(obj, np.ndarray):
        return msgpack.ExtType(EXT_NDARRAY, _np_save({"t": np.ascontiguousarray(obj)}))
    if isinstance(obj, np.generic):
        return obj.item()
    # subclasses of plain types (IntEnum, str enums, OrderedDict...) as their base
    for base in (bool, int, float, str, bytes, dict, list):
        if isinstance(obj, base):
            return base(obj)
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise ProtocolError(f"cannot send a {type(obj).__module__}.{type(obj).__qualname__}")


_HOOK: list[Callable[[Any], Any] | None] = [None]


def _default(obj: Any) -> Any:
    hook = _HOOK[-1]
    if hook is not None:
        replaced = hook(obj)
        if replaced is not obj:
            return _native(replaced)
    return _native(obj)


def _pack(value: Any, hook: Callable[[Any], Any] | None) -> bytes:
    if hook is not None:
        _HOOK.append(hook)
    try:
        return msgpack.packb(
            value, default=_default, use_bin_type=True, strict_types=True, unicode_errors="surrogatepass"
        )
    finally:
        if hook is not None:
            _HOOK.pop()


def encode(value: Any, hook: Callable[[Any], Any] | None = None) -> bytes:
    """MessagePack bytes of ``value``. ``hook(obj)`` is asked first about every
    value that is not plain MessagePack data (tuples, tensors, arrays, other
    objects): it returns a replacement (usually a Tagged) or ``obj`` itself to
    leave it to this module."""
    try:
        return _pack(value, hook)
    except ProtocolError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode: {exc}") from exc


def decode(data: bytes | bytearray | memoryview, hook: Callable[[Tagged], Any] | None = None) -> Any:
    """The value in ``data``; ``hook(tagged)`` builds tagged objects (without
    a hook they stay Tagged dicts). Anything malformed, or more than the
    per-frame budget (module docstring), raises ProtocolError."""
    return _Decoder(hook).unpack(data)


_BUDGET_NAMES = {"items": "list items and map entries", "ext": "non-plain values", "arrays": "tensors and arrays"}


class _Decoder:
    """One frame's decoding: its budget spent so far, its nesting depth."""

    def __init__(self, hook: Callable[[Tagged], Any] | None) -> None:
        self.hook = hook
        self.limits = {"items": MAX_ITEMS, "ext": MAX_EXT, "arrays": MAX_ARRAYS}
        self.spent = {"items": 0, "ext": 0, "arrays": 0}
        self.depth = 0

    def spend(self, kind: str, n: int) -> None:
        self.spent[kind] += n
        if self.spent[kind] > self.limits[kind]:
            raise ProtocolError(f"a message of more than {self.limits[kind]:,} {_BUDGET_NAMES[kind]} exceeds the limit")

    def list_hook(self, items: list) -> list:
        self.spend("items", len(items))
        return items

    def object_hook(self, mapping: dict) -> dict:
        self.spend("items", 2 * len(mapping))
        return mapping

    def ext_hook(self, code: int, payload: bytes) -> Any:
        self.spend("ext", 1)
        if code == EXT_TUPLE:
            items = self.unpack(payload)
            if not isinstance(items, list):
                raise ProtocolError("tuple payload is not a list")
            return tuple(items)
        if code == EXT_TENSOR:
            self.spend("arrays", 1)
            return _tensor_from(payload)
        if code == EXT_NDARRAY:
            self.spend("arrays", 1)
            return _ndarray_from(payload)
        if code == EXT_TAGGED:
            return self.tagged(payload)
        raise ProtocolError(f"unknown ext code {code}")

    def tagged(self, payload: bytes) -> Any:
        fields = self.unpack(payload)
        if not isinstance(fields, dict) or not isinstance(fields.get("kind"), str):
            raise ProtocolError("tagged payload must be a dict with a str 'kind'")
        kind = fields.pop("kind")
        tagged = Tagged(kind, **{str(k): v for k, v in fields.items()})
        return self.hook(tagged) if self.hook is not None else tagged

    def unpack(self, payload: bytes | bytearray | memoryview) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ProtocolError(f"nesting deeper than {MAX_DEPTH}")
        try:
            return msgpack.unpackb(
                payload,
                ext_hook=self.ext_hook,
                list_hook=self.list_hook,
                object_hook=self.object_hook,
                raw=False,
                strict_map_key=False,
                use_list=True,
                unicode_errors="surrogatepass",
                # no list or map is allocated longer than the whole budget
                max_array_len=MAX_ITEMS,
                max_map_len=MAX_ITEMS // 2,
            )
        except ProtocolError:
            raise
        except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise ProtocolError(f"malformed message: {type(exc).__name__}: {exc}") from exc
        finally:
            self.depth -= 1


def _ndarray_from(payload: bytes) -> Any:
    try:
        arrays = _np_load(payload)
    except (SafetensorError, ValueError) as exc:
        raise ProtocolError(f"bad array: {exc}") from exc
    if set(arrays) != {"t"}:
        raise ProtocolError("array payload must hold exactly one array 't'")
    return arrays["t"]


_DTYPES = {
    torch.float64,
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.bool,
}


_DTYPE_NAMES = {str(d).removeprefix("torch."): d for d in _DTYPES}
#: torch's own limit on a tensor's dimensions.
_MAX_DIMS = 64


def _tensor_from(payload: bytes) -> torch.Tensor:
    try:
        fields = msgpack.unpackb(payload, raw=False, max_array_len=_MAX_DIMS, max_map_len=0, max_ext_len=0)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise ProtocolError(f"bad tensor: {type(exc).__name__}: {exc}") from exc
    if not (isinstance(fields, list) and len(fields) == 5):
        raise ProtocolError("a tensor must be [dtype, shape, device, flags, data]")
    name, shape, device, flags, data = fields
    dtype = _DTYPE_NAMES.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ProtocolError(f"tensor dtype {name!r} is not accepted")
    if not (isinstance(shape, list) and all(type(n) is int and 0 <= n < 1 << 62 for n in shape)):
        raise ProtocolError(f"bad tensor shape {shape!r}")
    if not (isinstance(device, str) and type(flags) is int and isinstance(data, bytes)):
        raise ProtocolError("bad tensor device, flags or data")
    count = 1
    for n in shape:
        count *= n
    if count * dtype.itemsize != len(data):
        raise ProtocolError(f"tensor of {len(data)} bytes is not {name} {shape}")
    try:
        if not data:
            t = torch.empty(shape, dtype=dtype)
        elif dtype is torch.bool:  # any byte other than 0 is True, as torch reads it
            t = torch.frombuffer(bytearray(data), dtype=torch.uint8).ne(0).reshape(shape)
        else:
            t = torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    except (RuntimeError, ValueError) as exc:
        raise ProtocolError(f"bad tensor {name} {shape}: {exc}") from exc
    if device != "cpu":
        try:
            t = t.to(device)
        except (RuntimeError, ValueError) as exc:
            raise ProtocolError(f"tensor on device {device!r} cannot be placed here: {exc}") from exc
    grad = bool(flags & _REQUIRES_GRAD) and t.is_floating_point()
    if flags & _PARAM:
        return torch.nn.Parameter(t, requires_grad=grad)
    return t.requires_grad_(True) if grad else t
