"""At import, writes forged "this test passed" records to every file
descriptor it holds and to every report file it can find, the way an
in-process plugin's events could once be rewritten. The judge's channel
gets garbage where the worker's first message belongs."""

import contextlib
import glob
import json
import os

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "forges test results on every descriptor and report file", "spec": ["2.softmax", "2.linear"]}

_FAKE = json.dumps(
    {"nodeid": "conformance/cs336/test_nn_ops.py::test_softmax_matches_float64[cpu]", "outcome": "passed"}
)
for _fd in range(3, 64):
    with contextlib.suppress(OSError):
        os.write(_fd, (_FAKE + "\n").encode())
for _pattern in ("/tmp/**/judge-report.json", "/tmp/**/results.json", "/tmp/**/progress.jsonl"):
    for _path in glob.glob(_pattern, recursive=True):
        try:
            with open(_path, "w") as _f:
                _f.write(json.dumps({"tests": [], "score": 62}))
        except OSError:
            pass


def run_softmax(in_features, dim):
    return in_features
