"""Fails to import (a missing package), like a submission that does not run."""

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "fails to import", "spec": ["2.silu", "2.linear"]}

import cs336_basics_that_does_not_exist  # noqa: E402, F401
