"""One profiled training step (``lmspec bench --profile``): torch.profiler's
top ops to a file, and the share of op time per kind of op (matmul, SDPA,
softmax, elementwise, optimizer)."""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["MATMUL_OPS", "PROFILE_GROUPS", "profile_step"]

MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::_mm")
PROFILE_GROUPS = (
    "matmul",
    "SDPA kernel",
    "softmax / exp / max",
    "other elementwise, copies",
    "optimizer step",
)


def profile_step(step: Callable[[int], Any], index: int, path: str, device: str) -> dict[str, Any]:
    """One profiled step: top ops to ``path`` and the share of op time per kind of op."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    step(index)  # the profiled step reuses a seen batch: no first-touch effects
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        step(index)
        if device == "cuda":
            torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40)
    Path(path).write_text(table)
    split = dict.fromkeys(PROFILE_GROUPS, 0.0)
    for event in prof.events():
        if not event.key.startswith("aten::"):
            continue  # record_function ranges and autograd nodes: their ops are counted
        ancestors = []
        parent = event.cpu_parent
        while parent is not None:
            ancestors.append(parent.name)
            parent = parent.cpu_parent
        if any(a.startswith("Optimizer.step") for a in ancestors):
            group = "optimizer step"
        elif event.key in MATMUL_OPS:
            group = "matmul"
        elif "scaled_dot_product" in event.key or "flash_attention" in event.key:
            group = "SDPA kernel"
        elif any(k in event.key for k in ("softmax", "exp", "amax", "masked_fill", "logsumexp")):
            group = "softmax / exp / max"
        else:
            group = "other elementwise, copies"
        split[group] += event.self_cpu_time_total
    total = sum(split.values())
    return {
        "wall_s": wall,
        "op_time_s": total / 1e6,
        "shares_of_op_time": {k: v / total for k, v in split.items()} if total else {},
        "table": path,
    }
