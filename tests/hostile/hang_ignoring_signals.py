"""run_silu ignores SIGALRM and SIGUSR2 (both in-process timeouts) and spins:
only the grader's kill from outside can stop it."""

import signal

from reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu ignores timeout signals and spins", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    while True:
        pass
