"""The gpt2 profile's benchmarks (BENCHMARKS.md, "The gpt2 profile").

    python -m tools.bench.gpt2 [--steps N] [--threads T] [--grade]

1. Forward + backward of the reference ``GPTModel`` against the ``transformers``
   ``GPT2LMHeadModel`` of the same configuration (built locally, weights
   copied across so both compute the same function), alternating in one run:
   median seconds per step and their ratio.
2. ``--grade``: ``lmspec grade`` of the fixture reader's ``previous_chapters.py``
   end to end (wall and CPU seconds of the grader and its children).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lmspec import ROOT

CFG = {
    "vocab_size": 50257,
    "context_length": 256,
    "emb_dim": 256,
    "n_heads": 4,
    "n_layers": 4,
    "drop_rate": 0.0,
    "qkv_bias": True,
}
BATCH, TOKENS = 4, 256


def forward_backward(steps: int) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    from lmspec.conformance.gpt2 import oracles
    from lmspec.reference.gpt2 import GPTModel, load_weights_into_gpt

    hf = oracles.hf_gpt2(CFG, seed=0).train()
    ours = GPTModel(CFG).train()
    load_weights_into_gpt(ours, oracles.export_checkpoint(hf))
    ids = torch.randint(0, CFG["vocab_size"], (BATCH, TOKENS), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        gap = (ours(ids) - hf(ids).logits).abs().max().item()

    def step(model, logits_of) -> float:
        start = time.perf_counter()
        logits = logits_of(model)
        F.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    times: dict[str, list[float]] = {"reference": [], "transformers": []}
    for i in range(steps + 1):
        a = step(ours, lambda m: m(ids))
        b = step(hf, lambda m: m(ids).logits)
        if i:  # the first step warms up
            times["reference"].append(a)
            times["transformers"].append(b)
    ref, tr = statistics.median(times["reference"]), statistics.median(times["transformers"])
    return {"reference_s": ref, "transformers_s": tr, "ratio": ref / tr, "max_logit_gap": gap}


def grade_reader() -> dict[str, float]:
    reader = ROOT / "tests" / "fixture_repos" / "gpt2_reader" / "previous_chapters.py"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = Path(os.environ.get("TMPDIR", "/tmp")) / "lmspec-bench-gpt2-grade"
    cmd = [sys.executable, "-m", "lmspec", "grade", str(reader), "--out", str(out), "--quiet"]
    rc = subprocess.run(cmd, env=env, capture_output=True, text=True).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"grade_wall_s": wall, "grade_cpu_s": cpu, "exit": rc}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.gpt2", description=__doc__)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--grade", action="store_true")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]
    r = forward_backward(args.steps)
    print(
        f"GPTModel fwd+bwd, batch {BATCH} x {TOKENS}, emb {CFG['emb_dim']}, {CFG['n_layers']} layers, "
        f"{args.threads} threads: reference {r['reference_s'] * 1e3:.0f} ms, transformers "
        f"{r['transformers_s'] * 1e3:.0f} ms, ratio {r['ratio']:.2f} (max |logit gap| {r['max_logit_gap']:.2g}); "
        f"load average {load:.1f}"
    )
    if args.grade:
        g = grade_reader()
        print(
            f"lmspec grade previous_chapters.py: {g['grade_wall_s']:.1f} s wall, "
            f"{g['grade_cpu_s']:.1f} s CPU, exit {g['exit']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
