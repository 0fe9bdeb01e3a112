"""run_silu ends the process with os._exit(0), as if everything were fine."""

import os

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu calls os._exit(0)", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    os._exit(0)
