"""The worker's request loop, over two file descriptors (a process of its own)
or over plain function calls (the judge's ``--in-process`` debugging mode):
both go through ``start`` and ``handle``, so both behave the same."""

import os
import platform
import sys
from collections.abc import Callable
from typing import Any

from . import dynamo
from .loader import load
from .protocol import ProtocolError, decode, encode, read_frame, write_frame
from .server import JudgeIterableError, Server, describe

Pull = Callable[[int, int], tuple[list, bool]]


def start(args: Any, pull: Pull, tick: Callable[[int], None] = lambda k: None) -> tuple[Server, dict]:
    """Import the adapter (through the profile's binder when it has one); the
    server and the "ready" report for the judge. ``args``: __main__.parse;
    ``pull`` and ``tick``: the server's ways to the judge during a call."""
    import torch

    dynamo.defer()  # before the submission: its optimizer's first add_param_group would import torch._dynamo
    info = load(args.adapter, args.root, args.scratch, tuple(args.path), args.binder, args.data)
    module = info["module"]
    functions = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None)))
    ready = {
        "origin": info["origin"],
        "metadata": info["metadata"],
        "error": info["error"],
        "intake": info["intake"],
        "functions": functions if module is not None else [],
        "absent": info.get("absent") or {},
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": torch.__version__,
        "pid": os.getpid(),
        "cuda": torch.cuda.is_available(),
    }
    return Server(module, args.root, args.scratch, pull, tick), ready


def handle(server: Server, data: bytes) -> bytes:
    """One request frame in, one reply frame out; never raises."""
    try:
        hook, writeback = server.decoder()
        request = decode(data, hook)
        if not isinstance(request, dict):
            raise ProtocolError("a request must be a dict")
        reply = server.run(request, writeback)
    except ProtocolError as exc:
        reply = {"err": describe(exc, "decoding the request") | {"protocol": True}, "seq": _seq(data)}
    except BaseException as exc:  # the worker's own failure, reported as such
        reply = {"err": describe(exc, "the worker") | {"protocol": True}, "seq": _seq(data)}
    try:
        return encode(reply, server.encode_hook)
    except ProtocolError as exc:
        what = reply.get("err", {}).get("in") if "err" in reply else "the result"
        return encode({"err": describe(exc, f"sending {what} to the judge"), "seq": reply.get("seq")})


def _seq(data: bytes) -> Any:
    """The sequence number of a request that could not be decoded in full."""
    try:
        request = decode(data, lambda t: None)
    except ProtocolError:
        return None
    return request.get("seq") if isinstance(request, dict) else None


def serve_fds(fd_in: int, fd_out: int, args: Any) -> int:
    import torch

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))

    def pull(ident: int, n: int) -> tuple[list, bool]:
        write_frame(fd_out, encode({"pull": ident, "n": n}))
        answer = decode(read_frame(fd_in))
        return unpack_pull(ident, answer)

    def tick(k: int) -> None:
        write_frame(fd_out, encode({"tick": k}))

    server, ready = start(args, pull, tick)
    write_frame(fd_out, encode({"ready": ready}))
    while True:
        try:
            data = read_frame(fd_in)
        except (EOFError, OSError):
            return 0
        write_frame(fd_out, handle(server, data))


def unpack_pull(ident: int, answer: Any) -> tuple[list, bool]:
    """The judge's answer to a pull: (items, done), or the judge iterable's
    own exception raised inside the implementation."""
    if not isinstance(answer, dict):
        raise ProtocolError("bad answer to a pull")
    if "err" in answer:
        raise JudgeIterableError(ident, str(answer["err"]))
    items, done = answer.get("ok"), answer.get("done")
    if not isinstance(items, list) or not isinstance(done, bool):
        raise ProtocolError("bad answer to a pull")
    return items, done
