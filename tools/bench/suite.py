"""Benchmark 4: wall time of the suite itself.

- ``python -m pytest conformance -n 2 --hypothesis-profile ci`` (the reference);
- ``python -m pytest tests -n 2 --hypothesis-profile ci`` (the meta-tests);
- ``python -m tools.grade`` on the reference (one submission).

Each is one run by default (minutes each; ``--suite-repeats`` for more), and
the 1-minute load average before and after is recorded: these numbers are
only comparable when the machine is otherwise idle. ``--quick`` only times
collection of the conformance suite (``--collect-only``).
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lmspec.tools.bench.common import REPO, fmt_s, load_1min, markdown_table, subprocess_env, summary


def _run(cmd: list[str], timeout: float) -> dict[str, Any]:
    load = load_1min()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=timeout)
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, output = None, f"timed out after {timeout:.0f} s: {exc}"
    wall = time.perf_counter() - t0
    # the last line: pytest's "N passed in Xs" (with or without its "=" rule)
    lines = output.strip().splitlines()
    return {
        "wall_s": wall,
        "returncode": rc,
        "summary": lines[-1].strip("= ") if lines else "",
        "load_before": load,
        "load_after": load_1min(),
    }


def commands(quick: bool, grade_out: Path) -> list[tuple[str, list[str]]]:
    py = sys.executable
    profile = ["--hypothesis-profile", "ci", "-p", "no:cacheprovider"]
    if quick:
        return [
            (
                "conformance (collect only)",
                [py, "-m", "pytest", "conformance", "-q", "--collect-only", *profile],
            )
        ]
    return [
        ("conformance -n 2", [py, "-m", "pytest", "conformance", "-n", "2", "-q", *profile]),
        ("meta-tests -n 2", [py, "-m", "pytest", "tests", "-n", "2", "-q", *profile]),
        ("grade reference", [py, "-m", "tools.grade", "--out", str(grade_out), "--quiet", "--format", "json"]),
    ]


def run(*, quick: bool, log: Any, repeats: int, timeout: float = 1800) -> dict[str, Any]:
    results: dict[str, Any] = {"runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for label, cmd in commands(quick, Path(tmp) / "grade-out"):
            log(f"suite: {label}: {' '.join(cmd[1:])}")
            runs = [_run(cmd, timeout) for _ in range(1 if quick else repeats)]
            results["runs"][label] = {
                "command": " ".join(["python", *cmd[1:]]).replace(str(Path(tmp)), "$TMP"),
                "wall_s": summary([r["wall_s"] for r in runs]),
                "returncode": [r["returncode"] for r in runs],
                "summary": runs[-1]["summary"],
                "load": [(r["load_before"], r["load_after"]) for r in runs],
            }
    return results


def tables(results: dict[str, Any]) -> str:
    rows = []
    for label, r in results["runs"].items():
        loads = ", ".join(f"{a:.1f}->{b:.1f}" for a, b in r["load"])
        rows.append(
            [
                label,
                fmt_s(r["wall_s"]["median"]),
                str(r["wall_s"]["n"]),
                ",".join(str(c) for c in r["returncode"]),
                r["summary"],
                loads,
            ]
        )
    return markdown_table(["run", "wall (median)", "n", "exit", "last line of output", "load"], rows)
