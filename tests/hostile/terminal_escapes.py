"""Speaks to the staff's terminal: its errors and its output carry control
sequences (clear the screen, move the cursor, retitle the window, a C1 CSI,
a bell), hoping the grader prints them raw."""

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "puts terminal control sequences in its messages", "spec": ["2.silu", "2.linear"]}

ESCAPES = "\x1b[2J\x1b[H\x1b]0;pwned-title\x07\x9b5A\x07\x00\x08"


def run_silu(in_features):
    print(ESCAPES + "printed by the submission")
    raise RuntimeError(ESCAPES + "lmspec-escape-marker")
