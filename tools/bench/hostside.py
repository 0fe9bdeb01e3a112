"""The costs of the grader's host-side guards (issue 19):
``python -m tools.bench.hostside [frames] [envs] [--repeats N]``.

frames: the judge's peak memory decoding the worst frames the wire format
    accepts (at each per-frame budget: tensors and arrays, non-plain values,
    list items; and the largest frame, MAX_FRAME bytes of one binary value)
    and the flood frame it refuses (750,000 empty arrays, 48 MB). Each in a
    process of its own: peak RSS (``ru_maxrss``) of the process, before
    (imports and the frame's bytes held) and after decoding.
envs: wall time of ``lmspec grade tests/fixture_repos/needs_dependency
    --env auto``, cold (an empty environment cache: the sandboxed build, with
    heapdict from the package index) and cached, ``--repeats`` times each;
    medians and every run.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_MAKE = textwrap.dedent(
    """
    import sys
    import numpy as np, torch
    from lmspec.conformance.judge.worker import protocol as p
    values = {
        "arrays": lambda: [np.empty(0, dtype=np.float32)] * p.MAX_ARRAYS,
        "tensors": lambda: [torch.empty(0)] * p.MAX_ARRAYS,
        "tuples": lambda: [(None,)] * (p.MAX_EXT - 1),
        "lists": lambda: [[] for _ in range(p.MAX_ITEMS - 1)],
        "ints": lambda: list(range(1000, 1000 + p.MAX_ITEMS - 1)),
        "bytes": lambda: b"x" * (p.MAX_FRAME - 16),
        "flood (refused)": lambda: [np.empty(0, dtype=np.float32)] * 750_000,
    }
    with open(sys.argv[2], "wb") as f:
        f.write(p.encode(values[sys.argv[1]]()))
    """
)
_MEASURE = textwrap.dedent(
    """
    import json, resource, sys, time
    import numpy as np, torch
    from lmspec.conformance.judge.worker import protocol as p
    with open(sys.argv[1], "rb") as f:
        data = bytearray(f.read())  # as the judge's channel holds a frame
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        value = p.decode(data)
        outcome = "accepted"
    except p.ProtocolError as exc:
        outcome = f"refused: {exc}"
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"frame_mb": len(data) / 1e6, "rss_before_mb": before / 1024, "rss_peak_mb": after / 1024,
                      "decode_s": seconds, "outcome": outcome}))
    """
)
FRAME_KINDS = ("arrays", "tensors", "tuples", "lists", "ints", "bytes", "flood (refused)")


def frames() -> list[dict]:
    """Each frame made by one process and decoded by another (the peak is the decoder's alone)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    rows = []
    with tempfile.TemporaryDirectory(prefix="lmspec-bench-frames-") as folder:
        for kind in FRAME_KINDS:
            path = os.path.join(folder, "frame")
            subprocess.run([sys.executable, "-c", _MAKE, kind, path], env=env, check=True)
            out = subprocess.run([sys.executable, "-c", _MEASURE, path], capture_output=True, text=True, env=env)
            os.unlink(path)
            if out.returncode != 0:
                rows.append({"kind": kind, "error": out.stderr.strip().splitlines()[-1:]})
                continue
            row = {"kind": kind, **json.loads(out.stdout.strip().splitlines()[-1])}
            rows.append(row)
            print(
                f"{kind:16} frame {row['frame_mb']:8.1f} MB  RSS with the frame {row['rss_before_mb']:7.0f} MB  "
                f"peak {row['rss_peak_mb']:7.0f} MB  decode {row['decode_s']:5.2f} s  {row['outcome'][:60]}",
                flush=True,
            )
    return rows


def envs(repeats: int) -> dict:
    fixture = REPO / "tests" / "fixture_repos" / "needs_dependency"
    base = Path(tempfile.mkdtemp(prefix="lmspec-bench-envs-"))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    runs: dict[str, list[float]] = {"cold": [], "cached": []}
    builds = []
    try:
        repo = base / "needs_dependency"
        shutil.copytree(fixture, repo)
        for i in range(repeats):
            cache = base / f"cache-{i}"
            for kind in ("cold", "cached"):
                out = base / f"out-{i}-{kind}"
                cmd = [sys.executable, "-m", "tools.grade", str(repo), "--out", str(out), "--quiet"]
                cmd += ["--env", "auto", "--env-cache", str(cache)]
                start = time.perf_counter()
                proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
                seconds = time.perf_counter() - start
                data = json.loads((out / "results.json").read_text())
                environment = data["implementation"]["environment"] or {}
                # exit 1: graded, with the items it does not implement
                as_expected = bool(environment.get("cached")) == (kind == "cached")
                if proc.returncode not in (0, 1) or data["error"] or not as_expected:
                    raise RuntimeError(f"{kind} run {i}: exit {proc.returncode}, {data['error']}, {environment}")
                runs[kind].append(round(seconds, 1))
                if kind == "cold":
                    builds.append(environment.get("build_s"))
                print(
                    f"{kind:6} run {i}: {seconds:6.1f} s (environment build {environment.get('build_s')} s, "
                    f"load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result = {k: {"median_s": statistics.median(v), "runs_s": v} for k, v in runs.items()}
    result["cold"]["build_s"] = builds
    print(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.hostside", description=__doc__)
    p.add_argument("what", nargs="*", default=["frames", "envs"], choices=["frames", "envs"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=None, help="write the figures to this JSON file")
    args = p.parse_args(argv)
    report = {"machine_cpus": os.cpu_count(), "load_start": os.getloadavg()[0]}
    if "frames" in args.what:
        report["frames"] = frames()
    if "envs" in args.what:
        report["envs"] = envs(args.repeats)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
