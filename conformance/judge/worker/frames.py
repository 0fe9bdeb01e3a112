"""Frames: how the judge and the worker cut their byte streams into messages
(a 4-byte big-endian length, then that many bytes; protocol.py says what the
bytes are). A module of its own because it needs neither torch nor numpy:
the judge starts its worker before it imports them (conformance/session.py).
This module imports nothing from lmspec: the worker runs it from a read-only
copy inside the sandbox.
"""

import os
import struct

__all__ = ["LENGTH", "MAX_FRAME", "ProtocolError", "read_frame", "write_frame"]

#: Largest frame either side accepts (a 64 MiB memmap, a GPT-2 vocabulary...).
MAX_FRAME = int(os.environ.get("LMSPEC_MAX_FRAME", 512 << 20))
#: The length before each frame.
LENGTH = struct.Struct(">I")


class ProtocolError(Exception):
    """A frame or value that does not follow the wire format."""


def write_frame(fd: int, payload: bytes) -> None:
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f"message of {len(payload)} bytes exceeds the {MAX_FRAME}-byte limit")
    data = memoryview(LENGTH.pack(len(payload)) + payload)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError(f"stream closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> bytes:
    (n,) = LENGTH.unpack(_read_exact(fd, LENGTH.size))
    if n > MAX_FRAME:
        raise ProtocolError(f"announced message of {n} bytes exceeds the {MAX_FRAME}-byte limit")
    return _read_exact(fd, n)
