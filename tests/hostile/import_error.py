"""Imports a package that is not installed: a placeholder stands for it and
the grading goes on (only the names that use it would fail)."""

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "imports a package that is not installed", "spec": ["2.silu", "2.linear"]}

import cs336_basics_that_does_not_exist  # noqa: E402, F401
