"""Kills its own process while being imported (os._exit(1))."""

import os

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "os._exit(1) at import", "spec": ["2.silu", "2.linear"]}

os._exit(1)
