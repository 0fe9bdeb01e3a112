"""Benchmark 5: the cost of the trusted judge and its sandboxed worker.

- **per-call overhead**: one small adapter call (``run_silu`` on a 2×5
  tensor, then ``run_transformer_lm`` on a tiny model) made directly in this
  process, through the proxy in this process (``--in-process``: the same
  encoding, no pipe), through a worker without a sandbox, and through a
  bubblewrap worker; median of repeated calls after a warm-up;
- **worker start-up**: seconds from spawning a worker (reference adapter) to
  its ready report, bubblewrap and none;
- **grading**: ``python -m tools.grade`` wall time on the reference, on a
  typical failing submission (tests/mutants/nn_rope_half_split.py, built on
  the reference) and on a submission whose run_softmax hangs
  (tests/hostile/hang.py, default --timeout-per-call 60): the hang's cost is
  its wall time minus the reference's.
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lmspec.tools.bench.common import REPO, fmt_s, load_1min, markdown_table, subprocess_env


def _median_call_s(fn: Any, args: tuple, repeats: int) -> float:
    fn(*args)  # warm-up: lazy imports, caches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def per_call(repeats: int) -> dict[str, Any]:
    import torch

    import lmspec.reference.adapter as direct
    from lmspec.conformance.cs336.calls import LM_ARGS, lm_weights
    from lmspec.conformance.judge.implementation import Implementation
    from lmspec.conformance.judge.remote import RemoteFunction
    from lmspec.conformance.judge.sandbox import Sandbox, WorkerSpec, bwrap_problem
    from lmspec.conformance.profiles import cs336

    x = torch.randn(2, 5)
    ids = torch.randint(0, LM_ARGS["vocab_size"], (2, LM_ARGS["context_length"]))
    weights = lm_weights()
    cases = {
        "run_silu (2x5)": ("run_silu", (x,)),
        "run_transformer_lm (tiny, 2x4 ids)": ("run_transformer_lm", (*LM_ARGS.values(), weights, ids)),
    }
    FUNCTIONS = {f.name: f for f in cs336.FUNCTIONS}
    modes: dict[str, Any] = {"direct (no proxy)": None, "proxy, in-process": "in", "worker, no sandbox": Sandbox.NONE}
    if bwrap_problem() is None:
        modes["worker, bubblewrap"] = Sandbox.BWRAP
    out: dict[str, Any] = {}
    for mode, sandbox in modes.items():
        impl = None
        if sandbox is not None:
            spec = WorkerSpec("lmspec.reference.adapter", None, sandbox=Sandbox.NONE if sandbox == "in" else sandbox)
            spec = WorkerSpec(spec.adapter, None, sandbox=spec.sandbox, allow_reference=True)
            impl = Implementation(spec, FUNCTIONS, in_process=sandbox == "in")
        for label, (name, args) in cases.items():
            fn = getattr(direct, name) if impl is None else RemoteFunction(impl, name)
            out.setdefault(label, {})[mode] = _median_call_s(fn, args, repeats)
        if impl is not None:
            impl.close()
    return out


def startup(repeats: int) -> dict[str, Any]:
    from lmspec.conformance.judge.implementation import Implementation
    from lmspec.conformance.judge.sandbox import Sandbox, WorkerSpec, bwrap_problem
    from lmspec.conformance.profiles import cs336

    out: dict[str, Any] = {}
    for sandbox in (Sandbox.NONE, Sandbox.BWRAP):
        if sandbox is Sandbox.BWRAP and bwrap_problem() is not None:
            continue
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            spec = WorkerSpec("lmspec.reference.adapter", None, sandbox=sandbox, allow_reference=True)
            impl = Implementation(spec, {f.name: f for f in cs336.FUNCTIONS})
            times.append(time.perf_counter() - t0)
            impl.close()
        out[str(sandbox)] = statistics.median(times)
    return out


GRADINGS = (
    ("reference", ()),
    (
        "failing submission (RoPE half-split mutant)",
        ("--adapter", "tests/mutants/nn_rope_half_split.py", "--allow-reference"),
    ),
    ("run_softmax hangs (default --timeout-per-call 60)", ("--adapter", "tests/hostile/hang.py", "--allow-reference")),
)


def gradings(quick: bool, log: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, args in GRADINGS[:1] if quick else GRADINGS:
            extra = ("--spec", "2.linear") if quick else ()
            log(f"grading: {label}")
            load = load_1min()
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "tools.grade", "--out", f"{tmp}/g", "--quiet", *args, *extra],
                cwd=REPO,
                env=subprocess_env(),
                capture_output=True,
                timeout=3600,
            )
            wall = time.perf_counter() - t0
            data = json.loads(Path(f"{tmp}/g/results.json").read_text())
            out[label] = {
                "wall_s": wall,
                "score": f"{data['score']}/{data['max_score']}",
                "tests": sum(len(i["tests"]) + len((i.get("strict") or {}).get("tests", [])) for i in data["items"]),
                "load": (load, load_1min()),
            }
    return out


def run(*, quick: bool, log: Any) -> dict[str, Any]:
    log("grading: per-call overhead")
    calls = per_call(20 if quick else 300)
    log("grading: worker start-up")
    starts = startup(1 if quick else 5)
    return {"per_call_s": calls, "startup_s": starts, "gradings": gradings(quick, log)}


def tables(result: dict[str, Any]) -> str:
    calls = result["per_call_s"]
    modes = list(next(iter(calls.values())))
    rows = [[label, *(f"{calls[label][m] * 1e3:.3f}" for m in modes)] for label in calls]
    text = "Per call, median, milliseconds:\n\n" + markdown_table(["call", *modes], rows)
    text += "\n\nWorker start-up (reference adapter, to its ready report), median: " + ", ".join(
        f"{k} {v:.2f} s" for k, v in result["startup_s"].items()
    )
    rows = []
    reference = None
    for label, g in result["gradings"].items():
        reference = reference if reference is not None else g["wall_s"]
        extra = g["wall_s"] - reference
        rows.append(
            [
                label,
                fmt_s(g["wall_s"]),
                f"{extra:+.1f} s",
                g["score"],
                str(g["tests"]),
                "{:.1f}->{:.1f}".format(*g["load"]),
            ]
        )
    text += "\n\n" + markdown_table(["grading", "wall", "vs reference", "score", "tests", "load"], rows)
    return text


def submissions(quick: bool) -> list[tuple[str, list[str]]]:
    """The typical submissions: every mutant and variant (built on the
    reference) and the student-style repository, with their grader arguments."""
    out = []
    for folder in ("tests/mutants", "tests/variants"):
        for path in sorted((REPO / folder).glob("*.py")):
            out.append((f"{Path(folder).name[:-1]} {path.stem}", [str(path), "--allow-reference"]))
    out.append(
        ("student repository (tests/fixture_repos/cs336_student)", [str(REPO / "tests/fixture_repos/cs336_student")])
    )
    return out[:1] if quick else out


def distribution(*, quick: bool, log: Any) -> dict[str, Any]:
    """Grade every typical submission with the default settings, one after
    the other; wall time of each, and the phases of the slowest."""
    graded: dict[str, Any] = {}
    entries = submissions(quick)
    with tempfile.TemporaryDirectory() as tmp:
        for n, (label, args) in enumerate(entries, 1):
            log(f"gradings: {n}/{len(entries)} {label}")
            out = Path(tmp) / str(n)
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "lmspec", "grade", *args, "--out", str(out), "--quiet", "--format", "json"]
                + (["--spec", "2.linear"] if quick else []),
                cwd=REPO,
                env=subprocess_env(),
                capture_output=True,
                timeout=3600,
            )
            wall = time.perf_counter() - t0
            data = json.loads((out / "results.json").read_text())
            graded[label] = {
                "wall_s": wall,
                "score": f"{data['score']}/{data['max_score']}",
                "timings": data["timings"],
            }
    walls = sorted(g["wall_s"] for g in graded.values())
    return {
        "n": len(walls),
        "p50_s": statistics.median(walls),
        "p90_s": walls[int(0.9 * (len(walls) - 1))],
        "max_s": walls[-1],
        "load_end": load_1min(),
        "graded": graded,
    }


def distribution_tables(result: dict[str, Any]) -> str:
    text = (
        f"{result['n']} submissions graded one after the other with the default settings: "
        f"p50 {result['p50_s']:.1f} s, p90 {result['p90_s']:.1f} s, max {result['max_s']:.1f} s "
        f"(load at the end {result['load_end']:.1f}).\n\nThe slowest, by phase:\n\n"
    )
    rows = []
    slowest = sorted(result["graded"].items(), key=lambda kv: -kv[1]["wall_s"])[:6]
    for label, g in slowest:
        t = g["timings"]
        top = ", ".join(f"{k} {v:.1f}" for k, v in list(t.get("per_item_s", {}).items())[:3])
        rows.append(
            [
                label,
                f"{g['wall_s']:.1f} s",
                g["score"],
                f"{t.get('judge_startup_s') or 0:.1f}",
                f"{t.get('collection_s') or 0:.1f}",
                f"{t.get('tests_wall_s') or 0:.1f}",
                f"{t.get('shrinking_s', 0):.1f}",
                top,
            ]
        )
    headers = ["submission", "wall", "score", "judge start", "collect", "tests", "shrinking", "slowest items (s)"]
    return text + markdown_table(headers, rows)
