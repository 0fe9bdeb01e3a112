"""The ``lmspec`` command starts at once: ``--help``, of the command and of
every subcommand, imports neither torch nor numpy (issue 15: at most 0.5 s;
torch alone costs about 1 s here), and answers with its usage. A grading's
own process does not import them either: its judges and workers do (issue
29: torch cost the grader 3-4 CPU-seconds a grading)."""

import subprocess
import sys

import pytest

from lmspec.cli import COMMANDS

PROBE = """
import sys
from lmspec.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, f"exit status {exc.code}"
heavy = sorted({"torch", "numpy"} & set(sys.modules))
assert not heavy, f"{sys.argv[1:]} imported {heavy}"
"""


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_imports_nothing_heavy(command: str | None) -> None:
    args = ["--help"] if command is None else [command, "--help"]
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage" in proc.stdout.lower(), proc.stdout


def test_grading_imports_nothing_heavy_in_the_graders_own_process(tmp_path) -> None:
    args = ["grade", "--spec", "2.silu", "--out", str(tmp_path / "out"), "--quiet", "--format", "table,json,html"]
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "out" / "results.json").is_file()
