"""Shared machinery of the benchmarks: subprocess measurements, statistics, tables.

Every measurement that reports a whole-process peak runs in its own Python
process (``python -m tools.bench.worker TASK ARGS``), so that ``ru_maxrss``
belongs to that measurement alone and environment switches that must be set
before an import (``JAXTYPING_DISABLE``, ``RAYON_NUM_THREADS``) apply cleanly.
The worker prints one JSON line prefixed with ``RESULT_MARK``; everything else
it prints is passed through to our stderr.
"""

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULT_MARK = "@@BENCH-RESULT@@ "
EOT = "<|endoftext|>"


class BenchError(RuntimeError):
    """A measurement subprocess failed; the message carries its output tail."""


def load_1min() -> float:
    return os.getloadavg()[0]


def fixtures_dir() -> Path | None:
    """``$LMSPEC_FIXTURES`` or ``../shared/fixtures`` beside the repository, if present."""
    env = os.environ.get("LMSPEC_FIXTURES")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "fixtures")
    for path in candidates:
        if (path / "corpus.en").is_file():
            return path
    return None


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and the raw values (seconds or whatever unit was given)."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "values": list(values),
    }


def rss_now_bytes() -> int:
    """Current resident set size of this process (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (``ru_maxrss``; KiB on Linux)."""
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def children_peak_rss_bytes() -> int:
    """Largest peak RSS among waited-for child processes (pool workers)."""
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process; False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def hwm_bytes() -> int:
    """VmHWM (peak RSS since the last ``reset_peak_rss``) from /proc; 0 if unavailable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def subprocess_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment with the repository on ``PYTHONPATH``, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def run_worker(
    task: str,
    args: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 1200.0,
) -> dict[str, Any]:
    """Run ``tools.bench.worker`` TASK in a fresh interpreter and return its JSON result."""
    cmd = [sys.executable, "-m", "tools.bench.worker", task, json.dumps(dict(args))]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=subprocess_env(env), capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            result = json.loads(line[len(RESULT_MARK) :])
    if proc.returncode != 0 or result is None:
        tail = (proc.stdout[-2000:] + "\n" + proc.stderr[-4000:]).strip()
        raise BenchError(f"worker {task} {dict(args)} failed (rc {proc.returncode}):\n{tail}")
    result["process_wall_s"] = wall
    return result


def emit(result: Mapping[str, Any]) -> None:
    """Worker side: print the result line the parent looks for.

    ``peak_rss_bytes`` is this process's VmHWM: ``ru_maxrss`` would not do, as
    Linux carries the parent's RSS at fork into it across ``exec``.
    """
    payload = dict(result)
    payload.setdefault("peak_rss_bytes", hwm_bytes() or peak_rss_bytes())
    payload.setdefault("children_peak_rss_bytes", children_peak_rss_bytes())
    print(RESULT_MARK + json.dumps(payload), flush=True)


def _read_first(path: str, prefix: str) -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def machine_info() -> dict[str, Any]:
    """CPU model, cores, RAM and the versions that matter for these numbers (no imports)."""
    from importlib import metadata

    info: dict[str, Any] = {
        "cpu_model": _read_first("/proc/cpuinfo", "model name") or platform.processor(),
        "logical_cpus": os.cpu_count(),
        "ram_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    for name in ("torch", "numpy", "regex", "tokenizers", "tiktoken", "jaxtyping", "beartype"):
        try:
            info[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            info[name] = None
    return info


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_peak(peak: float | None, base: float | None) -> str:
    """``peak (+peak-base)``: whole-process peak RSS and its growth over the after-import RSS."""
    if peak is None:
        return "-"
    if not base:
        return fmt_bytes(peak)
    return f"{fmt_bytes(peak)} (+{fmt_bytes(peak - base)})"


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table; cells are str()-ed."""
    cells = [[str(c) for c in row] for row in rows]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "MISSED")
