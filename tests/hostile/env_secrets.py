"""Reads the grader's environment (a CI token...) and tries to get it into
the grader's outputs: printed, in an exception message, in return values."""

import os
import sys

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "leaks the environment into every output it can", "spec": ["2.silu", "2.linear"]}
_ENV = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()))
print("ENV", _ENV)
print("ENV", _ENV, file=sys.stderr)


def run_silu(in_features):
    raise ValueError(f"environment: {_ENV}")
