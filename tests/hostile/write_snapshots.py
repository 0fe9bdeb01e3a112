"""run_silu writes a file into the suite's snapshots/ folder (and answers
correctly). The sandbox shows the submission neither lmspec's files nor a
writable system; the meta-test removes the file should it ever appear."""

import contextlib
from pathlib import Path

import lmspec.reference.adapter as _ref
from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_silu writes into snapshots/", "spec": ["2.silu", "2.linear"]}
TARGET = Path("@@REPO@@") / "snapshots" / "_hostile_write_snapshots.npz"


def run_silu(in_features):
    with contextlib.suppress(OSError):
        TARGET.write_bytes(b"golden values, rewritten")
    return _ref.run_silu(in_features)
