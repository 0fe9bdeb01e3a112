"""run_silu prints 50 MB the first time it is called (and always answers
correctly)."""

import sys

import lmspec.reference.adapter as _ref
from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu prints 50 MB", "spec": ["2.silu", "2.linear"]}
_LINE = "x" * 1023 + "\n"


_printed = []


def run_silu(in_features):
    if not _printed:
        _printed.append(True)
        for _ in range(25 * 1024):  # 25 MB on each stream
            sys.stdout.write(_LINE)
            sys.stderr.write(_LINE)
    return _ref.run_silu(in_features)
