"""Measurements of the worker process taken from the judge's side (/proc),
so the untrusted process cannot report its own numbers."""

from pathlib import Path


def memory_kib(pid: int | None) -> dict[str, int]:
    """VmRSS and VmHWM of the process, in KiB."""
    if pid is None:
        raise RuntimeError("the worker's process is not known (not on Linux?)")
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        field, _, value = line.partition(":")
        if field in ("VmRSS", "VmHWM"):
            out[field] = int(value.split()[0])
    return out


def reset_peak(pid: int | None) -> None:
    """Reset the process's peak resident set (VmHWM) to its current size."""
    if pid is None:
        raise RuntimeError("the worker's process is not known (not on Linux?)")
    Path(f"/proc/{pid}/clear_refs").write_text("5")
