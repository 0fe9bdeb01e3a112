"""End-to-end smoke run of the reference: BPE -> encode -> train -> resume -> generate.

    python -m tools.smoke [--out DIR] [--no-typecheck] [--max-seconds S]

On CPU, in about a minute or less on 2 cores, it

1. writes a corpus of real English text: the documentation topics every
   Python installation ships (``pydoc_data.topics``, joined with
   ``<|endoftext|>``), so the run is the same on every machine;
2. trains a BPE tokenizer and encodes the corpus into train/validation uint16
   ``.npy`` files split at a document boundary (``python -m reference`` commands,
   run in-process);
3. trains a small TransformerLM (AdamW, warmup + cosine, clipping), logging
   JSONL, checkpointing mid-run and at the end, and plotting the loss curve;
4. resumes from the mid-run checkpoint IN A NEW PROCESS (``python -m reference
   train --resume``) and requires the final parameters and optimizer state to
   be bit-identical to the uninterrupted run's;
5. checks the final validation loss against the best unigram model of the same
   data (train-split frequencies, Laplace-smoothed) and against ln(vocab_size),
   and that a single small batch can be overfitted (loss < 0.1);
6. samples text with temperature and top-p from the final checkpoint.

It prints the time of each stage, writes ``summary.json`` in the output
directory (a temporary one unless ``--out`` is given) and exits with status 1,
naming each failed check, if any check fails. The runtime type checks stay on
(as in the CLI's default) unless ``--no-typecheck`` is given.
"""

import argparse
import contextlib
import io
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EOT = "<|endoftext|>"
BUDGET_S = 60.0

# One setting, chosen by measurement on a 2-core CPU (docs/walkthrough.md):
# small enough to train in ~15 s of one core, large enough to beat the unigram
# model by far (d_model 64 reached val 4.18, 96 reached 4.05, 128 4.01 for +20% time).
VOCAB_SIZE = 1024
VAL_FRACTION = 0.1
MODEL = {
    "vocab_size": VOCAB_SIZE,
    "context_length": 64,
    "d_model": 96,
    "num_layers": 2,
    "num_heads": 4,
    "d_ff": 256,  # 8/3 d_model, a multiple of 64
}
TRAIN = {
    "batch_size": 16,
    "steps": 240,
    "lr": 1e-2,  # best of 3e-3 / 6e-3 / 1e-2 / 2e-2 at this size
    "min_lr": 1e-3,
    "warmup_iters": 20,
    "weight_decay": 0.1,
    "max_grad_norm": 1.0,
    "eval_interval": 60,
    "eval_batches": 8,
    "log_interval": 10,
    "checkpoint_interval": 180,  # the resumed process replays steps 181..240
    "keep_checkpoints": True,
    "seed": 0,
    "threads": 1,  # also what the resumed process uses: it reads this run's config.json
}
# Margins of the learning checks, in nats/token (measured values are printed).
BEAT_UNIGRAM_BY = 1.0  # measured ~1.9 on pydoc (val 4.05 vs unigram 6.00)
BEAT_UNIFORM_BY = 2.0  # measured ~2.9 (ln 1024 = 6.93)
OVERFIT = {"batch_size": 8, "context_length": 32, "lr": 1e-2, "max_steps": 300, "target": 0.1}
GENERATE = {
    "prompt": "The return statement",
    "max_new_tokens": 48,
    "temperature": 0.8,
    "top_p": 0.9,
    "seed": 0,
}


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
        started, cpu_started = time.perf_counter(), _cpu_seconds()
        try:
            yield
        finally:
            self.times[name] = round(time.perf_counter() - started, 2)
            self.cpu_times[name] = round(_cpu_seconds() - cpu_started, 2)

    def check(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        return bool(ok)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["ok"]]


def _cpu_seconds() -> float:
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


def _quiet_cli(argv: list[str]) -> tuple[int, str]:
    """Run ``python -m reference ARGV`` in this process; return (status, its stdout+stderr)."""
    from lmspec.reference.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        status = main(argv)
    return status, buffer.getvalue()


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.strip().splitlines())


def write_corpus(path: Path) -> str:
    """Write the smoke corpus to ``path``; return a one-line description of it.

    Python's own documentation topics (``pydoc_data.topics``, 79 documents,
    467 KB in 3.11), one document per topic, joined with ``<|endoftext|>``:
    real English that every Python installation ships, so the run is the same
    everywhere. (The oracle fixtures were measured as an alternative and
    rejected: corpus.en + tinystories_sample.txt is 3.5x smaller and its
    validation tail is another domain; the model overfits to val 5.56 vs a
    unigram 6.15.)
    """
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    path.write_text(EOT.join(topics[k] for k in sorted(topics)), encoding="utf-8")
    return f"pydoc_data.topics of Python {platform.python_version()} ({len(topics)} documents)"


def unigram_cross_entropy(train: Any, val: Any, vocab_size: int) -> float:
    """Cross-entropy (nats/token) on ``val`` of the unigram model fitted on ``train``
    with add-one (Laplace) smoothing: ``p(i) = (count_i + 1) / (N + V)``."""
    import numpy as np

    counts = np.bincount(np.asarray(train), minlength=vocab_size).astype(np.float64)
    log_p = np.log((counts + 1.0) / (counts.sum() + vocab_size))
    return float(-log_p[np.asarray(val)].mean())


def overfit_one_batch(train_tokens: Any, vocab_size: int) -> tuple[list[float], int]:
    """Train a fresh model on ONE fixed batch; return the loss curve and steps taken."""
    import numpy as np
    import torch

    from lmspec.reference.nn import ModelConfig, TransformerLM
    from lmspec.reference.training import AdamW, clip_grad_norm, cross_entropy, get_batch

    settings = OVERFIT
    torch.manual_seed(0)
    config = ModelConfig(**{**MODEL, "context_length": settings["context_length"]})
    model = TransformerLM(config)
    optimizer = AdamW(model.parameters(), lr=settings["lr"], weight_decay=0.0)
    x, y = get_batch(
        train_tokens,
        settings["batch_size"],
        settings["context_length"],
        "cpu",
        generator=np.random.default_rng(0),
    )
    losses: list[float] = []
    for _ in range(settings["max_steps"]):
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        if losses[-1] < settings["target"]:
            break
    return losses, len(losses)


def run(args: argparse.Namespace, smoke: Smoke) -> None:
    out: Path = args.out
    smoke.facts["typecheck"] = os.environ.get("JAXTYPING_DISABLE", "0") in ("0", "", "false")
    smoke.facts["torch_threads"] = None
    started = time.perf_counter()

    with smoke.stage("import"):
        import numpy as np
        import torch

        import lmspec.reference as reference
        from lmspec.reference.training.checkpoint import read_checkpoint
        from lmspec.reference.training.config import TrainConfig
        from lmspec.reference.training.loop import train

        smoke.cleanup.callback(torch.set_num_threads, torch.get_num_threads())
        torch.set_num_threads(TRAIN["threads"])
        smoke.facts["torch_threads"] = torch.get_num_threads()
        print(
            f"  torch {torch.__version__}, {torch.get_num_threads()} thread(s), runtime "
            f"type checks {'ON' if reference.TYPECHECKED else 'OFF (JAXTYPING_DISABLE=1)'}"
        )

    corpus = out / "corpus.txt"
    with smoke.stage("corpus"):
        smoke.facts["corpus"] = write_corpus(corpus)
        print(f"  {smoke.facts['corpus']}: {corpus.stat().st_size:,} bytes")

    tok_dir = out / "tokenizer"
    with smoke.stage("train-bpe"):
        status, text = _quiet_cli(
            [
                "train-bpe",
                str(corpus),
                "--vocab-size",
                str(VOCAB_SIZE),
                "--out-dir",
                str(tok_dir),
                "--no-progress",
            ]
        )
        print(_indent(text), end="")
        if status != 0:
            raise SmokeFailure(f"train-bpe exited with {status}")
        from lmspec.reference.tokenizer import Tokenizer

        tokenizer = Tokenizer.from_files(tok_dir / "vocab.json", tok_dir / "merges.txt", [EOT])
        sample = "Dictionaries are mutable mappings. <|endoftext|> ¿Qué? 1234"
        smoke.check(
            "bpe vocabulary size",
            tokenizer.vocab_size == VOCAB_SIZE,
            f"{tokenizer.vocab_size} ids, {EOT} = {tokenizer.special_token_ids.get(EOT)}",
        )
        smoke.check(
            "bpe round trip",
            tokenizer.decode(tokenizer.encode(sample)) == sample,
            f"{len(tokenizer.encode(sample))} tokens for {sample!r}",
        )

    train_npy, val_npy = out / "data" / "train.npy", out / "data" / "val.npy"
    with smoke.stage("encode"):
        status, text = _quiet_cli(
            [
                "encode",
                str(corpus),
                "--tokenizer",
                str(tok_dir),
                "--output",
                str(train_npy),
                "--val-fraction",
                str(VAL_FRACTION),
                "--val-output",
                str(val_npy),
                "--no-progress",
            ]
        )
        print(_indent(text), end="")
        if status != 0:
            raise SmokeFailure(f"encode exited with {status}")
        train_tokens = np.load(train_npy, mmap_mode="r")
        val_tokens = np.load(val_npy, mmap_mode="r")
        eot_id = tokenizer.special_token_ids[EOT]
        smoke.check(
            "memory-mapped uint16 splits",
            isinstance(train_tokens, np.memmap) and train_tokens.dtype == np.uint16 and val_tokens.dtype == np.uint16,
            f"train {len(train_tokens):,} + val {len(val_tokens):,} tokens, {train_tokens.dtype}",
        )
        smoke.check(
            "split at a document boundary",
            int(train_tokens[-1]) == eot_id,
            f"last train token is {EOT} (id {eot_id})",
        )
        smoke.facts["tokens"] = {"train": len(train_tokens), "val": len(val_tokens)}

    with smoke.stage("unigram"):
        unigram = unigram_cross_entropy(train_tokens, val_tokens, VOCAB_SIZE)
        uniform = math.log(VOCAB_SIZE)
        smoke.facts.update(unigram_val_loss=unigram, uniform_loss=uniform)
        print(f"  unigram (Laplace) val cross-entropy {unigram:.4f}; ln V = {uniform:.4f}")

    run_a = out / "run"
    config = TrainConfig.from_dict(
        {
            "train_data": str(train_npy),
            "val_data": str(val_npy),
            "out_dir": str(run_a),
            "model": MODEL,
            **TRAIN,
        }
    )
    with smoke.stage("train"):
        result = train(config, progress=False, verbose=True)
        records = [json.loads(line) for line in result.log_path.read_text().splitlines()]
        val_loss = result.val_loss
        smoke.facts.update(
            val_loss=val_loss,
            train_loss=result.train_loss,
            initial_val_loss=records[0]["val_loss"],
            train_seconds=result.elapsed_s,
            tokens_seen=result.tokens_seen,
        )
        keys = {"step", "train_loss", "val_loss", "lr", "grad_norm", "tokens_seen", "elapsed_s"}
        smoke.check(
            "JSONL log",
            all(keys <= set(r) for r in records) and len(records) > 10,
            f"{len(records)} records with {', '.join(sorted(keys))}",
        )
        smoke.check(
            "beats the unigram model",
            val_loss is not None and val_loss < unigram - BEAT_UNIGRAM_BY,
            f"val {val_loss:.4f} < unigram {unigram:.4f} - {BEAT_UNIGRAM_BY}",
        )
        smoke.check(
            "far below ln V",
            val_loss is not None and val_loss < uniform - BEAT_UNIFORM_BY,
            f"val {val_loss:.4f} < ln V {uniform:.4f} - {BEAT_UNIFORM_BY} (untrained: {records[0]['val_loss']:.4f})",
        )
        from lmspec.reference.plotting import plot_loss_curve

        png = plot_loss_curve(
            records,
            run_a / "loss.png",
            title=f"smoke: {smoke.facts['corpus']}",
            reference_lines={"unigram (val)": unigram, "ln V (uniform)": uniform},
        )
        if png is not None:
            smoke.check("loss plot", png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", str(png))
        else:
            print("  (matplotlib missing: no loss plot)")

    mid = config.checkpoint_path.with_suffix(f".step{TRAIN['checkpoint_interval']}.pt")
    run_b = out / "resumed"
    with smoke.stage("resume (new process)"):
        command = [
            sys.executable,
            "-m",
            "reference",
            "train",
            "--config",
            str(run_a / "config.json"),
            "--resume",
            str(mid),
            "--out-dir",
            str(run_b),
            "--checkpoint",
            str(run_b / "checkpoint.pt"),
            "--no-keep-checkpoints",
            "--no-plot",
            "--no-progress",
        ]
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        )
        proc = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(_indent(proc.stdout), end="")
        if proc.returncode != 0:
            raise SmokeFailure(f"resumed training exited with {proc.returncode}")
        a, b = read_checkpoint(result.checkpoint), read_checkpoint(run_b / "checkpoint.pt")
        same_model = a["model"].keys() == b["model"].keys() and all(
            torch.equal(a["model"][k], b["model"][k]) for k in a["model"]
        )
        same_optimizer = _same_state(a["optimizer"], b["optimizer"])
        worst = max(float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"])
        smoke.facts["resume_bit_identical"] = same_model and same_optimizer
        smoke.check(
            "resume is bit-identical",
            same_model and same_optimizer and a["iteration"] == b["iteration"],
            f"step {b['iteration']} from the step-{TRAIN['checkpoint_interval']} checkpoint: "
            f"model {'==' if same_model else '!='}, optimizer {'==' if same_optimizer else '!='} "
            f"(max |diff| {worst:.3g})",
        )

    with smoke.stage("overfit one batch"):
        losses, steps = overfit_one_batch(train_tokens, VOCAB_SIZE)
        smoke.facts.update(overfit_loss=losses[-1], overfit_steps=steps)
        smoke.check(
            "single-batch overfit",
            losses[-1] < OVERFIT["target"],
            f"loss {losses[0]:.3f} -> {losses[-1]:.4f} in {steps} steps "
            f"({OVERFIT['batch_size']}x{OVERFIT['context_length']} tokens, "
            f"target < {OVERFIT['target']})",
        )

    with smoke.stage("generate"):
        from lmspec.reference.generation import generate
        from lmspec.reference.nn import ModelConfig, TransformerLM

        payload = read_checkpoint(result.checkpoint)
        model = TransformerLM(ModelConfig(**payload["metadata"]["config"]["model"]))
        model.load_state_dict(payload["model"])
        model.eval()
        g = GENERATE
        prompt_ids = tokenizer.encode(g["prompt"])
        new_ids = generate(
            model,
            prompt_ids,
            g["max_new_tokens"],
            temperature=g["temperature"],
            top_p=g["top_p"],
            eos_token_id=eot_id,
            generator=torch.Generator().manual_seed(g["seed"]),
        )
        text = tokenizer.decode(new_ids)
        smoke.facts["sample"] = g["prompt"] + text
        smoke.check(
            "generated ids are valid",
            0 < len(new_ids) <= g["max_new_tokens"]
            and all(0 <= i < VOCAB_SIZE for i in new_ids)
            and isinstance(text, str),
            f"{len(new_ids)} tokens (temperature {g['temperature']}, top-p {g['top_p']})",
        )
        print(_indent("sample: " + repr(g["prompt"] + text)), end="")

    smoke.facts["total_seconds"] = round(time.perf_counter() - started, 2)


def _same_state(a: Any, b: Any) -> bool:
    """Exact equality of nested optimizer state (tensors compared bitwise)."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b))
    return a == b


def _report(smoke: Smoke, budget: float) -> None:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.smoke", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="keep outputs here (default: a temp dir)")
    parser.add_argument(
        "--no-typecheck",
        action="store_true",
        help="run with JAXTYPING_DISABLE=1 (no runtime shape/type checks)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="fail if the run takes longer (default: report the 60 s budget only)",
    )
    args = parser.parse_args(argv)
    if args.no_typecheck:
        if "reference" in sys.modules:
            parser.error("--no-typecheck must be decided before `reference` is imported")
        os.environ["JAXTYPING_DISABLE"] = "1"
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
        _report(smoke, args.max_seconds or BUDGET_S)
        total = smoke.facts.get("total_seconds", 0.0)
        if args.max_seconds is not None and total > args.max_seconds:
            smoke.check("time budget", False, f"{total:.1f} s > --max-seconds {args.max_seconds}")
        summary = {
            "ok": not smoke.failed,
            "times": smoke.times,
            "checks": smoke.checks,
            **smoke.facts,
        }
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        if smoke.failed:
            names = ", ".join(c["name"] for c in smoke.failed)
            print(f"SMOKE FAILED: {len(smoke.failed)} check(s): {names}", file=sys.stderr)
            return 1
        print(f"smoke ok: {len(smoke.checks)} checks passed")
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
