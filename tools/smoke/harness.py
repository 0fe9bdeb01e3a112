"""The smoke run's harness: stages with their times, checks, facts, the
summary printed at the end and written to ``summary.json``.

A profile's smoke run (``tools/smoke/NAME.py``) gets a ``Smoke`` and fills it
stage by stage; ``execute`` runs it, turns a stage that cannot run at all
(``SmokeFailure``) into a failed check, and gives the exit status.
"""

import argparse
import contextlib
import io
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: The repository's top folder (``python -m reference`` runs from there).
REPO = Path(__file__).resolve().parent.parent.parent


class SmokeFailure(Exception):
    """A stage could not run at all (its checks are then reported as failed)."""


class Smoke:
    """Collects stage timings, checks and facts, and prints them as it goes."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.times: dict[str, float] = {}
        self.cpu_times: dict[str, float] = {}
        self.cleanup = contextlib.ExitStack()  # undoes global changes (torch threads)
        self.checks: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        print(f"[{name}]", flush=True)
        started, cpu_started = time.perf_counter(), cpu_seconds()
        try:
            yield
        finally:
            self.times[name] = round(time.perf_counter() - started, 2)
            self.cpu_times[name] = round(cpu_seconds() - cpu_started, 2)

    def check(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        return bool(ok)

    def skip(self, name: str, why: str) -> None:
        """A check that cannot run here (an optional extra missing): counted apart, and said."""
        self.checks.append({"name": name, "ok": True, "skipped": True, "detail": why})
        print(f"  skip {name}: {why}", flush=True)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["ok"]]

    @property
    def skipped(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c.get("skipped")]


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its finished children: unlike
    wall-clock time, it does not grow when other jobs share the machine."""
    try:
        import resource
    except ImportError:  # not on Unix
        return time.process_time()
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def quiet_cli(argv: list[str]) -> tuple[int, str]:
    """Run ``python -m reference ARGV`` in this process; return (status, its stdout+stderr)."""
    from lmspec.reference.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        status = main(argv)
    return status, buffer.getvalue()


def reference_process(argv: list[str]) -> tuple[int, str]:
    """Run ``python -m reference ARGV`` in a new process from the repository's
    top folder; return (status, its stdout+stderr)."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "reference", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc.returncode, proc.stdout


def indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.strip().splitlines())


def report(smoke: Smoke, budget: float) -> None:
    """Print the stages' times and the losses the run measured."""
    total = smoke.facts.get("total_seconds", sum(smoke.times.values()))
    cpu_total = sum(smoke.cpu_times.values())
    print("\ntiming, wall-clock s (CPU s):")
    for name, wall in smoke.times.items():
        print(f"  {name:<22} {wall:6.1f}  ({smoke.cpu_times.get(name, float('nan')):.1f})")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    within = total <= budget
    print(
        f"total {total:.1f} s wall ({'within' if within else 'OVER'} the {budget:.0f} s budget), "
        f"{cpu_total:.1f} s CPU; {os.cpu_count()} CPUs, load average {load:.1f}"
    )
    smoke.facts.update(load_average=load, total_cpu_seconds=round(cpu_total, 2))
    if "val_loss" in smoke.facts and smoke.facts["val_loss"] is not None:
        f = smoke.facts
        print(
            f"losses (nats/token): final val {f['val_loss']:.4f}, train {f['train_loss']:.4f}; "
            f"unigram {f['unigram_val_loss']:.4f}; ln V {f['uniform_loss']:.4f}; "
            f"untrained {f['initial_val_loss']:.4f}"
        )


def execute(run: Callable[[argparse.Namespace, Smoke], None], args: argparse.Namespace, budget: float) -> int:
    """Run one profile's smoke ``run`` into ``args.out`` (a temporary folder when
    None): report, write ``summary.json``; 1 when a check failed, else 0."""
    import tempfile

    with contextlib.ExitStack() as stack:
        if args.out is None:
            args.out = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lmspec-smoke-")))
        args.out.mkdir(parents=True, exist_ok=True)
        print(f"smoke run in {args.out}")
        smoke = Smoke(args.out)
        try:
            with smoke.cleanup:
                run(args, smoke)
        except SmokeFailure as exc:
            smoke.check("stage ran", False, str(exc))
        report(smoke, args.max_seconds or budget)
        _check_budget(smoke, args.max_seconds)
        _write_summary(smoke, args.out / "summary.json")
        return _verdict(smoke)


def _check_budget(smoke: Smoke, max_seconds: float | None) -> None:
    total = smoke.facts.get("total_seconds", 0.0)
    if max_seconds is not None and total > max_seconds:
        smoke.check("time budget", False, f"{total:.1f} s > --max-seconds {max_seconds}")


def _write_summary(smoke: Smoke, path: Path) -> None:
    summary = {"ok": not smoke.failed, "times": smoke.times, "checks": smoke.checks, **smoke.facts}
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")


def _verdict(smoke: Smoke) -> int:
    if smoke.failed:
        names = ", ".join(c["name"] for c in smoke.failed)
        print(f"SMOKE FAILED: {len(smoke.failed)} check(s): {names}", file=sys.stderr)
        return 1
    skipped = smoke.skipped
    line = f"smoke ok: {len(smoke.checks) - len(skipped)} checks passed"
    if skipped:
        reasons = "; ".join(f"{c['name']}: {c['detail']}" for c in skipped)
        line += f", {len(skipped)} skipped ({reasons})"
    print(line)
    return 0
