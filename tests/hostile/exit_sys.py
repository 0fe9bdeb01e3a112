"""run_silu raises SystemExit(3) (sys.exit inside a function)."""

import sys

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu calls sys.exit(3)", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    sys.exit(3)
