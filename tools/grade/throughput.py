"""Batch throughput on this machine (BENCHMARKS.md, "Grading a course"): grade
lmspec's own mutants and variants (tests/mutants/*.py, tests/variants/*.py,
single adapters files built on the reference, hence --allow-reference) as
one batch per LocalCluster size, in one run, and say where the time went.

    python -m lmspec.tools.grade.throughput --workers 1,2          # the whole catalog
    python -m lmspec.tools.grade.throughput --workers 1,2,3,4 --every 9

Needs a checkout (tests/ is not installed). Every batch regrades everything
(``regrade``) into its own folder under --out. Reported per batch: the
submissions per hour (from the cluster's start to the last result), the
mean load average and CPU use during it, and per grading the mean of each
phase (judge start-up, collection, the rest of the worker start-up, the tests, scoring and
reports), the task's own overhead, and the workers' idle time.
"""

import argparse
import json
import os
import shutil
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from lmspec.conformance.options import Settings
from lmspec.tools.grade.batch import grade_batch
from lmspec.tools.grade.files import REPO

PHASES = (
    ("judge start-up", "judge_startup_s"),
    ("collection", "collection_s"),
    ("to the first result (the rest of the worker's start)", "until_first_result_s"),
    ("tests", "tests_wall_s"),
    ("scoring and reports", "after_judge_s"),
)


def catalog(every: int = 1, limit: int | None = None) -> list[Path]:
    files = sorted((REPO / "tests" / "mutants").glob("*.py")) + sorted((REPO / "tests" / "variants").glob("*.py"))
    return [f for f in files if not f.name.startswith("_")][::every][:limit]


def _cpu() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]  # total, idle + iowait


class _Load:
    """The 1-minute load average sampled every 5 s, and the CPU use, while a batch runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.cpu = _cpu()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(5.0):
            self.samples.append(os.getloadavg()[0])

    def finish(self) -> dict[str, float]:
        self.stop.set()
        self.thread.join()
        total, idle = _cpu()
        busy = 1 - (idle - self.cpu[1]) / max(1, total - self.cpu[0])
        return {
            "load_mean": round(statistics.fmean(self.samples), 2) if self.samples else float("nan"),
            "load_max": round(max(self.samples), 2) if self.samples else float("nan"),
            "cpu_busy": round(100 * busy, 1),
        }


def measure(files: list[Path], workers: int, out: Path, settings: Any) -> dict[str, Any]:
    subs = out / "submissions"
    shutil.rmtree(out, ignore_errors=True)
    subs.mkdir(parents=True)
    for f in files:
        shutil.copy(f, subs / f"{f.parent.name}-{f.name}")
    load = _Load()
    grade_batch(subs, out=out / "results", settings=settings.replace(workers=workers, regrade=True, quiet=False))
    run = json.loads((out / "results" / "batch.json").read_text()) | load.finish()
    results = [json.loads(p.read_text()) for p in sorted((out / "results").glob("*/results.json"))]
    run["phases"] = {
        key: round(statistics.fmean(r["timings"][key] for r in results if r.get("timings", {}).get(key)), 2)
        for _, key in PHASES
        if any(r.get("timings", {}).get(key) for r in results)
    }
    batch = [r.get("batch") or {} for r in results]
    run["grade_s"] = round(statistics.fmean(b["grade_s"] for b in batch), 2)
    run["task_overhead_s"] = round(statistics.fmean(b["task_s"] - b["grade_s"] for b in batch), 2)
    busy = sum(b["task_s"] for b in batch)
    run["worker_idle_pct"] = round(100 * (1 - busy / (run["workers"] * run["grading_wall_s"])), 1)
    per_item: dict[str, list[float]] = {}
    for r in results:
        for item, seconds in (r.get("timings", {}).get("per_item_s") or {}).items():
            per_item.setdefault(item, []).append(seconds)
    run["slowest_items"] = sorted(
        ((k, round(statistics.fmean(v), 2)) for k, v in per_item.items()), key=lambda kv: -kv[1]
    )[:6]
    run["not_passed"] = sum(not r.get("passed") for r in results)
    return run


def table(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| workers | submissions | wall (s) | per hour | mean grading (s) | load avg (mean/max) | CPU busy |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        lines.append(
            f"| {r['workers']} | {r['graded']} | {r['grading_wall_s']:.0f} | {r['per_hour']:.0f} | {r['grade_s']:.1f} "
            f"| {r['load_mean']:.2f} / {r['load_max']:.2f} | {r['cpu_busy']:.0f}% |"
        )
    lines += ["", "| workers | " + " | ".join(label for label, _ in PHASES) + " | task overhead | workers idle |"]
    lines.append("| ---: " * (len(PHASES) + 3) + "|")
    for r in runs:
        phases = " | ".join(f"{r['phases'].get(key, float('nan')):.2f}" for _, key in PHASES)
        lines.append(
            f"| {r['workers']} | {phases} | {r['task_overhead_s']:.2f} | {r['worker_idle_pct']:.0f}% "
            f"(cluster start {r['cluster_start_s']:.1f} s) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lmspec.tools.grade.throughput", description=__doc__)
    p.add_argument("--workers", default="1,2", help="LocalCluster sizes to measure, in this order (1,2)")
    p.add_argument("--every", type=int, default=1, metavar="K", help="every K-th file of the catalog (1: all)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N files (after --every)")
    p.add_argument("--jobs", type=int, default=1, help="judge processes per submission (1)")
    p.add_argument("--spec", default=None, help="only these spec items (default: the whole suite)")
    p.add_argument("--out", default="bench-out/batch", help="working folder (bench-out/batch)")
    args = p.parse_args(argv)
    files = catalog(args.every, args.limit)
    settings = Settings(jobs=args.jobs, spec=args.spec, allow_reference=True)
    runs = []
    print(f"{len(files)} submissions (mutants and variants), cores: {os.cpu_count()}, load: {os.getloadavg()}")
    for n in (int(x) for x in args.workers.split(",")):
        start = time.monotonic()
        runs.append(measure(files, n, Path(args.out) / f"workers-{n}", settings))
        print(f"workers={n}: {time.monotonic() - start:.0f} s", flush=True)
    (Path(args.out) / "throughput.json").write_text(json.dumps(runs, indent=1) + "\n")
    print(table(runs))
    for r in runs:
        print(f"workers={r['workers']}: slowest items (mean tests' time per grading): {r['slowest_items']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
