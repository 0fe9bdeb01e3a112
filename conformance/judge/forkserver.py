"""A warm judge for runs of many short gradings in one process (lmspec's
meta-tests: one grading of a few items per mutant).

A fresh judge spends about 3 CPU-seconds of its ~4 before the first test
importing Python's, pytest's, Hypothesis' and torch's modules (BENCHMARKS.md
section 11). The fork server imports them once; each grading is then a
``fork`` of it running the same ``pytest.main`` with the same arguments a
fresh judge gets (launch.judge_command), in its own process group, working
folder and log. Nothing of one grading reaches the next: each starts from
the server's state, which holds imported modules only (no test has run in
it, no torch operation either: a fork after one could inherit a thread
pool; the one thread besides its own, numpy's OpenBLAS pool, is shut down
and rebuilt around a fork by OpenBLAS itself). The submission is never
imported here: the forked judge starts its own sandboxed worker, as a
fresh one does. When the server cannot fork a judge (it died, it could
not start), launch.run_judge starts a fresh judge instead.

The protocol, one JSON line per message on the server's stdin and stdout:
``{"argv": [...], "cwd": DIR, "log": FILE}`` -> ``{"pid": PID}`` when the
judge is forked, then ``{"pid": PID, "status": N}`` when it has ended
(``os.waitstatus_to_exitcode``). One grading at a time.
"""

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

#: What a judge imports before its first test (conformance/plugin.py and what pytest loads for it).
PRELOAD = (
    "torch",
    "numpy",
    "hypothesis",
    "pytest",
    "xdist.plugin",
    "pytest_timeout",
    "_hypothesis_pytestplugin",
    "_pytest.python",
    "_pytest.assertion.rewrite",
    "lmspec.conformance.plugin",
)


class ForkServer:
    """The client side: one server process, started on first use with the
    interpreter and environment of the judge command it is given, started
    again when those change or when it has died."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        """``preload``: modules of lmspec's own that its judges import into themselves besides
        ``PRELOAD`` (the references, for lmspec's meta-tests' ``--in-process`` judges), marked read by
        Hypothesis as a worker's modules are (``channel.imports_unread``)."""
        self.preload = preload
        self._proc: subprocess.Popen | None = None
        self._key: tuple | None = None
        self._home: tempfile.TemporaryDirectory | None = None

    def _start(self, interpreter: list[str], env: dict[str, str]) -> subprocess.Popen:
        from lmspec.conformance.judge.launch import die_with_parent

        key = (tuple(interpreter), tuple(sorted(env.items())))
        if self._proc is not None and (self._key != key or self._proc.poll() is not None):
            self.close()
        if self._proc is None:
            self._home = tempfile.TemporaryDirectory(prefix="lmspec-forkserver-")  # an empty working folder
            self._proc = subprocess.Popen(
                [*interpreter, "-m", "lmspec.conformance.judge.forkserver", *self.preload],
                cwd=self._home.name,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGKILL),
            )
            self._key = key
        return self._proc

    def start(self, command: list[str], cwd: Path, env: dict[str, str], log: Path) -> int | None:
        """Fork a judge running ``command`` (``[python, *flags, "-m", "pytest", *args]``);
        its process id (the leader of its own group), or None when the server could not fork it."""
        cut = command.index("pytest") - 1
        if command[cut] != "-m":
            raise ValueError(f"not a judge command: {command[:4]}")
        proc = self._start(command[:cut], env)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps({"argv": command[cut + 2 :], "cwd": str(cwd), "log": str(log)}).encode())
            proc.stdin.write(b"\n")
            proc.stdin.flush()
        except OSError:
            self.close()
            return None
        return self._answer("pid")

    def judge(self, command: list[str], cwd: Path, env: dict[str, str], log: Path) -> "ForkedJudge | None":
        """A judge forked to run ``command``, or None (start a fresh one instead)."""
        pid = self.start(command, cwd, env, log)
        return None if pid is None else ForkedJudge(self, pid)

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status of the judge last started; None when it is still running after
        ``timeout`` seconds (None: no limit) or when the server died meanwhile."""
        if self._proc is None or self._proc.stdout is None:
            return None
        if timeout is not None and not select.select([self._proc.stdout], [], [], timeout)[0]:
            return None
        return self._answer("status")

    def _answer(self, key: str) -> int | None:
        """The number under ``key`` in the server's next line; None (and the
        server closed) when the line is not one, or the server is gone."""
        assert self._proc is not None and self._proc.stdout is not None
        try:
            reply = json.loads(self._proc.stdout.readline() or b"{}")
        except (OSError, ValueError):
            reply = {}
        if not isinstance(reply, dict) or not isinstance(reply.get(key), int):
            self.close()
            return None
        return reply[key]

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                with contextlib.suppress(OSError):
                    stream.close() if stream is not None else None
        if self._home is not None:
            self._home.cleanup()
        self._proc = self._key = self._home = None


class ForkedJudge:
    """A judge forked by the server, with the part of ``subprocess.Popen``
    that launch.run_judge uses (pid, poll, wait, returncode)."""

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid = server, pid
        self.returncode: int | None = None
        self._done = False

    def poll(self) -> int | None:
        return self._settle(0)

    def wait(self, timeout: float | None = None) -> int | None:
        """As ``Popen.wait``: the exit status, or TimeoutExpired when the judge runs on after ``timeout``."""
        if self._settle(timeout) is None:
            raise subprocess.TimeoutExpired(f"forked judge {self.pid}", timeout or 0)
        return self.returncode

    def _settle(self, timeout: float | None) -> int | None:
        if not self._done:
            status = self.server.wait(timeout)
            if status is not None or self.server._proc is None:  # ended, or its server died (and it with it)
                self.returncode, self._done = -signal.SIGKILL if status is None else status, True
        return self.returncode


def _judge(request: dict[str, Any], ready: int) -> None:
    """In the forked child: become a judge as launch.run_judge starts one, run, exit."""
    from lmspec.conformance.judge.launch import die_with_parent

    os.setsid()  # the leader of its own group, as start_new_session makes a fresh judge
    die_with_parent(signal.SIGKILL)()
    os.write(ready, b".")
    os.close(ready)
    os.chdir(request["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for fd in (null, log):
        os.close(fd)
    import random

    import numpy
    import pytest

    from lmspec.conformance import report

    random.seed()  # a fresh judge's generators: seeded anew, never the server's state
    numpy.random.seed()
    report.IMPORTED_AT = __import__("time").time()
    sys.argv = ["pytest", *request["argv"]]
    status = 1
    try:
        status = int(pytest.main(list(request["argv"])))
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    for line in inp:
        request = json.loads(line)
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(ready_r)
                _judge(request, ready_w)
            finally:
                os._exit(70)
        os.close(ready_w)
        os.read(ready_r, 1)  # the judge leads its own group (or has died): it can be signalled as one
        os.close(ready_r)
        out.write(json.dumps({"pid": pid}).encode() + b"\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"pid": pid, "status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        out.flush()


def local_constants() -> None:
    """Hypothesis' constants of the local modules imported so far, read once here rather than in every
    judge: at collection Hypothesis parses the source of every module it has not read yet that is not
    installed (lmspec's own, here) and keeps the numbers and strings in it, to draw inputs from. A
    judge forked after this reads only the modules imported since (its test modules and their
    helpers); the set it ends with is the one a fresh judge builds (its union over the same
    modules). This module, the forked judge's ``__main__``, is marked read without being read: a fresh
    judge never imports it, so its constants must not be drawn from. Hypothesis' private functions:
    where they are missing, every judge reads every module, as before."""
    import warnings

    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "slow code in plugin": not a plugin, and nothing is timed here
        from hypothesis.internal.conjecture import providers

        providers._seen_modules.add(id(sys.modules["__main__"]))
        providers._get_local_constants()


def main() -> None:
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", cwd)]  # nothing from the working folder
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    local_constants()
    from lmspec.conformance.judge.channel import imports_unread  # preloaded with the plugin

    with imports_unread():
        for name in sys.argv[1:]:
            if name.startswith("lmspec."):
                importlib.import_module(name)
    import gc

    gc.freeze()  # the preloaded objects: never scanned in a judge, so their pages stay shared with the server
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints never reach the protocol
    serve(inp, out)


if __name__ == "__main__":
    main()
