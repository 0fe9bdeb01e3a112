"""Run the conformance suite against an adapter in a fresh process and read
its per-test JSON report (the same path the grader uses)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_suite(adapter: str | Path, spec: list[str] | None = None, *extra: str, timeout: float = 600) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "conformance"),
            "-q",
            "-p",
            "no:cacheprovider",
            "--adapter",
            str(adapter),
            "--lmspec-report",
            str(report),
            "-x" if "--no-x" not in extra else "",
            "--hypothesis-profile",
            "ci",
        ]
        cmd = [c for c in cmd if c] + [e for e in extra if e != "--no-x"]
        if spec:
            cmd += ["--spec", ",".join(spec)]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        data = json.loads(report.read_text()) if report.exists() else {"tests": []}
        data["returncode"] = proc.returncode
        data["output"] = proc.stdout[-4000:] + proc.stderr[-2000:]
        return data


def failed(data: dict) -> list[dict]:
    return [t for t in data["tests"] if t["outcome"] in ("failed", "error")]


def passed(data: dict) -> list[dict]:
    return [t for t in data["tests"] if t["outcome"] == "passed"]
