"""Benchmark 3: training-step throughput, reference TransformerLM vs a torch-native twin.

One step = forward, loss, ``zero_grad``, backward, optimizer step, on a fixed
random batch stream (seeded; the same for every variant). Variants, each in its
own process with ``torch.set_num_threads(os.cpu_count())``:

- ``ref``: ``reference.nn.TransformerLM`` + ``reference.training.cross_entropy``
  + ``reference.training.AdamW``, runtime type checks off (``JAXTYPING_DISABLE=1``)
  and on (the default);
- ``native``: ``tools.bench.torch_native.NativeLM`` (``nn.Linear``, SDPA,
  ``F.rms_norm``...) + ``F.cross_entropy`` + ``torch.optim.AdamW``; its
  logits are first checked against the reference's with the same weights.

Warmup steps are excluded; the median step time gives tokens/s. Model FLOPs per
token are ``3 x reference.accounting.forward_flops(config)["total"] /
context_length`` (forward + backward matmuls); on CUDA the ratio of achieved to
peak bf16 FLOP/s is the MFU. CUDA adds bf16 autocast and ``torch.compile``
variants; on a CPU-only machine they are skipped with a printed reason.
"""

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmspec.tools.bench.common import (
    emit,
    fmt_bytes,
    fmt_peak,
    load_1min,
    markdown_table,
    rss_now_bytes,
    run_worker,
    verdict,
)
from lmspec.tools.bench.profiling import PROFILE_GROUPS, profile_step

TARGET_FRACTION = 0.8  # reference (checks off) >= 0.8x torch-native tokens/s

CONFIGS: dict[str, dict[str, Any]] = {
    "small": {
        "model": dict(vocab_size=10_000, context_length=128, d_model=128, num_layers=2, num_heads=4, d_ff=384),
        "batch": 16,
        "warmup": 3,
        "steps": 10,
    },
    "base": {
        "model": dict(
            vocab_size=10_000,
            context_length=256,
            d_model=512,
            num_layers=4,
            num_heads=16,
            d_ff=1344,
        ),
        "batch": 8,
        "warmup": 2,
        "steps": 8,
    },
}
QUICK_CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {
        "model": dict(vocab_size=512, context_length=32, d_model=32, num_layers=1, num_heads=2, d_ff=64),
        "batch": 4,
        "warmup": 1,
        "steps": 3,
    }
}

# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' data sheets, matched
# by substring of torch.cuda.get_device_name() in this order; override with
# LMSPEC_PEAK_FLOPS for anything else.
PEAK_BF16: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989.4e12),  # SXM
    ("H200", 989.4e12),
    ("H800", 989.4e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("L4", 121e12),
)


def peak_bf16_flops(device_name: str) -> float | None:
    if os.environ.get("LMSPEC_PEAK_FLOPS"):
        return float(os.environ["LMSPEC_PEAK_FLOPS"])
    for key, flops in PEAK_BF16:
        if key in device_name:
            return flops
    return None


# --- worker side -------------------------------------------------------------
def worker_train(args: dict[str, Any]) -> None:
    import torch

    from lmspec.reference.accounting import forward_flops
    from lmspec.reference.nn import ModelConfig

    torch.set_num_threads(args["threads"])
    device = torch.device(args["device"])
    variant = args["variant"]
    cfg = ModelConfig(**args["model"])
    batch, warmup, steps = args["batch"], args["warmup"], args["steps"]
    result: dict[str, Any] = {"threads": torch.get_num_threads(), "base_rss_bytes": rss_now_bytes()}
    model, opt, loss_fn = _model_and_optimizer(args, cfg, device, result)
    if "compile" in variant:
        model = torch.compile(model)
    use_bf16 = "bf16" in variant

    gen = torch.Generator().manual_seed(1)
    data = torch.randint(cfg.vocab_size, (warmup + steps, batch, cfg.context_length + 1), generator=gen)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def step(i: int, marks: list[float] | None = None) -> Any:
        x = data[i, :, :-1].to(device, non_blocking=True)
        y = data[i, :, 1:].to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            logits = model(x)
            loss = loss_fn(logits, y)
        if marks is not None:
            sync()
            marks.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if marks is not None:
            sync()
            marks.append(time.perf_counter())
        opt.step()
        return loss.detach()

    times, loss = _timed_steps(step, warmup, steps, sync)
    phases = _phase_times(step, warmup, steps, sync)
    tokens = batch * cfg.context_length
    median = statistics.median(times)
    flops_per_token = 3 * forward_flops(cfg)["total"] / cfg.context_length
    result.update(
        step_s=median,
        step_times=times,
        tokens_per_step=tokens,
        tokens_per_s=tokens / median,
        model_flops_per_s=flops_per_token * tokens / median,
        flops_per_token=flops_per_token,
        final_loss=float(loss),
        phase_s={k: statistics.median(v) for k, v in phases.items()},
    )
    if device.type == "cuda":
        _add_gpu_facts(result, device)
    if args.get("profile"):
        result["profile"] = profile_step(step, warmup + steps - 1, args["profile"], device.type)
    emit(result)


def _model_and_optimizer(args: dict[str, Any], cfg: Any, device: Any, result: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The reference model with its AdamW and loss, or the torch-native one (checked
    equivalent to the reference: its largest logit difference goes in ``result``)."""
    import torch

    from lmspec.reference.nn import TransformerLM

    torch.manual_seed(0)
    if args["impl"] == "ref":
        from lmspec.reference.training import AdamW, cross_entropy

        model: Any = TransformerLM(cfg, device=device)
        return model, AdamW(model.parameters(), lr=1e-3, weight_decay=0.01), cross_entropy
    from lmspec.tools.bench.torch_native import NativeLM, check_equivalence, native_loss

    model = NativeLM(**args["model"]).to(device)
    reference_model = TransformerLM(cfg, device=device)
    probe = torch.randint(cfg.vocab_size, (2, cfg.context_length), device=device)
    result["max_logit_diff_vs_ref"] = check_equivalence(reference_model, model, probe)
    del reference_model
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01), native_loss


def _timed_steps(step: Callable[..., Any], warmup: int, steps: int, sync: Callable[[], Any]) -> tuple[list[float], Any]:
    """Wall time of each step after ``warmup`` ones; the last loss."""
    times: list[float] = []
    loss = None
    for i in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        loss = step(i)
        sync()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times, loss


def _phase_times(step: Callable[..., Any], warmup: int, steps: int, sync: Callable[[], Any]) -> dict[str, list[float]]:
    """Forward+loss, backward and optimizer times from extra steps (the syncs between
    phases cost a little on CUDA)."""
    phases: dict[str, list[float]] = {"forward+loss": [], "backward": [], "optimizer": []}
    for i in range(min(steps, 3)):
        sync()
        marks = [time.perf_counter()]
        step(warmup + i, marks)
        sync()
        marks.append(time.perf_counter())
        for name, a, b in zip(phases, marks, marks[1:]):
            phases[name].append(b - a)
    return phases


def _add_gpu_facts(result: dict[str, Any], device: Any) -> None:
    import torch

    name = torch.cuda.get_device_name(device)
    peak = peak_bf16_flops(name)
    result.update(
        gpu=name,
        peak_bf16_flops=peak,
        mfu=None if peak is None else result["model_flops_per_s"] / peak,
        cuda_peak_allocated_bytes=torch.cuda.max_memory_allocated(),
    )


# --- parent side -------------------------------------------------------------
def variants(cuda: bool) -> list[tuple[str, str, str, bool]]:
    """(label, impl, variant, checks) per device."""
    rows = [
        ("reference, checks off", "ref", "eager", False),
        ("reference, checks on", "ref", "eager", True),
        ("torch-native", "native", "eager", False),
    ]
    if cuda:
        for variant in ("bf16", "compile", "compile+bf16"):
            rows.append((f"reference {variant}", "ref", variant, False))
            rows.append((f"torch-native {variant}", "native", variant, False))
    return rows


def run(out: Path, *, quick: bool, log: Any, profile: bool) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    threads = os.cpu_count() or 1
    results: dict[str, Any] = {"threads": threads, "devices": {}, "skipped": []}
    if not cuda:
        reason = (
            "CUDA not available (torch.cuda.is_available() is False): device cuda, "
            "bf16 autocast, torch.compile variants and MFU skipped"
        )
        log("train: " + reason)
        results["skipped"].append(reason)
    configs = QUICK_CONFIGS if quick else CONFIGS
    for device in ["cpu"] + (["cuda"] if cuda else []):
        per_device: dict[str, Any] = {}
        for name, cfg in configs.items():
            rows: dict[str, Any] = {"config": cfg, "load_before": load_1min()}
            for label, impl, variant, checks in variants(device == "cuda"):
                log(f"train: {device} {name}: {label}")
                env = {"JAXTYPING_DISABLE": "0" if checks else "1"}
                args = {
                    "impl": impl,
                    "variant": variant,
                    "device": device,
                    "threads": threads,
                    "model": cfg["model"],
                    "batch": cfg["batch"],
                    "warmup": cfg["warmup"],
                    "steps": cfg["steps"],
                }
                if profile:
                    slug = label.replace(" ", "_").replace(",", "")
                    args["profile"] = str(out / "profiles" / f"train-{device}-{name}-{slug}.txt")
                try:
                    rows[label] = run_worker("train", args, env=env)
                except Exception as exc:  # a compile failure must not sink the rest
                    log(f"train: {label} failed: {str(exc)[-500:]}")
                    rows[label] = {"error": str(exc)[-2000:]}
            native = rows["torch-native"]["tokens_per_s"]
            off = rows["reference, checks off"]["tokens_per_s"]
            on = rows["reference, checks on"]["tokens_per_s"]
            rows["ratio_ref_over_native"] = off / native
            rows["checks_on_overhead"] = off / on - 1
            rows["target_met"] = off / native >= TARGET_FRACTION
            rows["load_after"] = load_1min()
            per_device[name] = rows
        results["devices"][device] = per_device
    return results


_COLUMNS = [
    "config",
    "variant",
    "tokens/s",
    "step (median)",
    "vs native",
    "model GFLOP/s",
    "MFU",
    "fwd / bwd / opt %",
    "peak mem",
]


def tables(results: dict[str, Any]) -> str:
    out = []
    for device, per_device in results["devices"].items():
        rows = [row for name, r in per_device.items() for row in _config_rows(name, r)]
        out.append(f"**{device}**\n\n" + markdown_table(_COLUMNS, rows))
    prof_rows = [
        [f"{device} {name}", label]
        + [f"{100 * row['profile']['shares_of_op_time'].get(g, 0):.0f}%" for g in PROFILE_GROUPS]
        + [f"{row['profile']['op_time_s'] / row['profile']['wall_s']:.2f}"]
        for device, per_device in results["devices"].items()
        for name, r in per_device.items()
        for label, row in r.items()
        if isinstance(row, dict) and "profile" in row
    ]
    if prof_rows:
        out.append(
            "Profile of one step (torch.profiler; share of the time spent inside aten ops):\n\n"
            + markdown_table(["run", "variant", *PROFILE_GROUPS, "op time / wall"], prof_rows)
        )
    for reason in results["skipped"]:
        out.append(f"Skipped: {reason}.")
    return "\n\n".join(out)


def _config_rows(name: str, r: dict[str, Any]) -> list[list[str]]:
    """One model configuration's rows: a row per variant, then the ratio of the reference to native."""
    m = r["config"]["model"]
    shape = (
        f"{name}: V{m['vocab_size']} d{m['d_model']} L{m['num_layers']} "
        f"H{m['num_heads']} ff{m['d_ff']} T{m['context_length']} B{r['config']['batch']}"
    )
    native = r["torch-native"].get("tokens_per_s")
    rows = [
        _variant_row(shape, label, row, native)
        for label, row in r.items()
        if isinstance(row, dict) and label != "config"
    ]
    rows.append(
        [
            shape,
            "ref (off) / native",
            f"{r['ratio_ref_over_native']:.2f}x",
            "",
            f"target >= {TARGET_FRACTION}: {verdict(r['target_met'])}",
            "",
            f"checks-on overhead {100 * r['checks_on_overhead']:+.0f}%",
            "",
            f"load {r['load_before']:.1f}->{r['load_after']:.1f}",
        ]
    )
    return rows


def _variant_row(shape: str, label: str, row: dict[str, Any], native: float | None) -> list[str]:
    if "error" in row:
        return [shape, label, "error", "", "", "", "", "", ""]
    mfu = row.get("mfu")
    ph = row["phase_s"]
    total = sum(ph.values())
    split = " / ".join(f"{100 * v / total:.0f}" for v in ph.values())
    return [
        shape,
        label,
        f"{row['tokens_per_s']:,.0f}",
        f"{row['step_s'] * 1000:.0f} ms",
        f"{row['tokens_per_s'] / native:.2f}x" if native else "-",
        f"{row['model_flops_per_s'] / 1e9:.1f}",
        "-" if mfu is None else f"{100 * mfu:.1f}%",
        split,
        fmt_bytes(row["cuda_peak_allocated_bytes"])
        if "cuda_peak_allocated_bytes" in row
        else fmt_peak(row["peak_rss_bytes"], row["base_rss_bytes"]),
    ]
