"""The cs336 smoke run of the reference: BPE -> encode -> train -> resume -> generate.

    lmspec smoke [--profile cs336] [--out DIR] [--no-typecheck] [--max-seconds S]

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

Each numbered step is one function below, called in order by ``run``. The
harness (``harness.py``) prints the time of each stage, writes
``summary.json`` and exits with status 1, naming each failed check, if any
check fails. The runtime type checks stay on (as in the CLI's default)
unless ``--no-typecheck`` is given.
"""

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from .harness import Smoke, SmokeFailure, indent, quiet_cli, reference_process
from .measures import same_state, unigram_cross_entropy, write_corpus

EOT = "<|endoftext|>"
BUDGET_S = 60.0

# One setting, chosen by measurement on a 2-core CPU:
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
    """The whole run, stage by stage, into ``args.out``."""
    out: Path = args.out
    smoke.facts["typecheck"] = os.environ.get("JAXTYPING_DISABLE", "0") in ("0", "", "false")
    smoke.facts["torch_threads"] = None
    started = time.perf_counter()
    import_stage(smoke)
    corpus = corpus_stage(smoke, out / "corpus.txt")
    tokenizer = train_bpe_stage(smoke, corpus, out / "tokenizer")
    train_npy, val_npy = out / "data" / "train.npy", out / "data" / "val.npy"
    train_tokens, val_tokens = encode_stage(smoke, corpus, out / "tokenizer", tokenizer, train_npy, val_npy)
    unigram, uniform = baselines_stage(smoke, train_tokens, val_tokens)
    config, result = train_stage(smoke, train_npy, val_npy, out / "run", unigram, uniform)
    resume_stage(smoke, config, result.checkpoint, out / "resumed")
    overfit_stage(smoke, train_tokens)
    generate_stage(smoke, tokenizer, result.checkpoint)
    smoke.facts["total_seconds"] = round(time.perf_counter() - started, 2)


def import_stage(smoke: Smoke) -> None:
    """Import torch and the reference (timed: it is part of every run), one torch thread."""
    with smoke.stage("import"):
        import numpy  # noqa: F401  (their import time is this stage's)
        import torch

        import lmspec.reference as reference
        import lmspec.reference.training.loop  # noqa: F401

        smoke.cleanup.callback(torch.set_num_threads, torch.get_num_threads())
        torch.set_num_threads(TRAIN["threads"])
        smoke.facts["torch_threads"] = torch.get_num_threads()
        print(
            f"  torch {torch.__version__}, {torch.get_num_threads()} thread(s), runtime "
            f"type checks {'ON' if reference.TYPECHECKED else 'OFF (JAXTYPING_DISABLE=1)'}"
        )


def corpus_stage(smoke: Smoke, corpus: Path) -> Path:
    """1. The corpus: Python's documentation topics joined with <|endoftext|>."""
    with smoke.stage("corpus"):
        smoke.facts["corpus"] = write_corpus(corpus)
        print(f"  {smoke.facts['corpus']}: {corpus.stat().st_size:,} bytes")
    return corpus


def train_bpe_stage(smoke: Smoke, corpus: Path, tok_dir: Path) -> Any:
    """2a. ``train-bpe`` in-process; the tokenizer's size and a round trip."""
    with smoke.stage("train-bpe"):
        argv = ["train-bpe", str(corpus), "--vocab-size", str(VOCAB_SIZE), "--out-dir", str(tok_dir), "--no-progress"]
        _cli_step(argv, "train-bpe")
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
    return tokenizer


def encode_stage(
    smoke: Smoke, corpus: Path, tok_dir: Path, tokenizer: Any, train_npy: Path, val_npy: Path
) -> tuple[Any, Any]:
    """2b. ``encode`` in-process into train/validation splits; read back memory-mapped."""
    with smoke.stage("encode"):
        argv = ["encode", str(corpus), "--tokenizer", str(tok_dir), "--output", str(train_npy)]
        argv += ["--val-fraction", str(VAL_FRACTION), "--val-output", str(val_npy), "--no-progress"]
        _cli_step(argv, "encode")
        import numpy as np

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
    return train_tokens, val_tokens


def _cli_step(argv: list[str], name: str) -> None:
    status, text = quiet_cli(argv)
    print(indent(text), end="")
    if status != 0:
        raise SmokeFailure(f"{name} exited with {status}")


def baselines_stage(smoke: Smoke, train_tokens: Any, val_tokens: Any) -> tuple[float, float]:
    """5a. What the model must beat: the unigram model of the same data, ln V."""
    with smoke.stage("unigram"):
        unigram = unigram_cross_entropy(train_tokens, val_tokens, VOCAB_SIZE)
        uniform = math.log(VOCAB_SIZE)
        smoke.facts.update(unigram_val_loss=unigram, uniform_loss=uniform)
        print(f"  unigram (Laplace) val cross-entropy {unigram:.4f}; ln V = {uniform:.4f}")
    return unigram, uniform


def train_stage(
    smoke: Smoke, train_npy: Path, val_npy: Path, run_dir: Path, unigram: float, uniform: float
) -> tuple[Any, Any]:
    """3. Train (JSONL log, checkpoints, loss plot); 5b. beat the baselines."""
    from lmspec.reference.training.config import TrainConfig
    from lmspec.reference.training.loop import train

    config = TrainConfig.from_dict(
        {
            "train_data": str(train_npy),
            "val_data": str(val_npy),
            "out_dir": str(run_dir),
            "model": MODEL,
            **TRAIN,
            "plot": have_matplotlib(),  # without the plot extra: no plot, and no warning from the loop
        }
    )
    with smoke.stage("train"):
        result = train(config, progress=False, verbose=True)
        records = [json.loads(line) for line in result.log_path.read_text().splitlines()]
        smoke.facts.update(
            val_loss=result.val_loss,
            train_loss=result.train_loss,
            initial_val_loss=records[0]["val_loss"],
            train_seconds=result.elapsed_s,
            tokens_seen=result.tokens_seen,
        )
        _check_learning(smoke, records, result.val_loss, unigram, uniform)
        _check_plot(smoke, records, run_dir / "loss.png", unigram, uniform)
    return config, result


def _check_learning(smoke: Smoke, records: list[dict[str, Any]], val_loss: Any, unigram: float, uniform: float) -> None:
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


def have_matplotlib() -> bool:
    """Whether the plot extra is installed (the loss-plot check needs it)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _check_plot(smoke: Smoke, records: list[dict[str, Any]], path: Path, unigram: float, uniform: float) -> None:
    if not have_matplotlib():
        smoke.skip("loss plot", "matplotlib is not installed: pip install 'lmspec[plot]'")
        return
    from lmspec.reference.plotting import plot_loss_curve

    png = plot_loss_curve(
        records,
        path,
        title=f"smoke: {smoke.facts['corpus']}",
        reference_lines={"unigram (val)": unigram, "ln V (uniform)": uniform},
    )
    if png is not None:
        smoke.check("loss plot", png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", str(png))
    else:
        print("  (matplotlib missing: no loss plot)")


def resume_stage(smoke: Smoke, config: Any, checkpoint: Path, run_dir: Path) -> None:
    """4. Resume from the mid-run checkpoint in a new process; bit-identical end state."""
    mid = config.checkpoint_path.with_suffix(f".step{TRAIN['checkpoint_interval']}.pt")
    with smoke.stage("resume (new process)"):
        status, text = reference_process(
            [
                "train",
                "--config",
                str(Path(config.out_dir) / "config.json"),
                "--resume",
                str(mid),
                "--out-dir",
                str(run_dir),
                "--checkpoint",
                str(run_dir / "checkpoint.pt"),
                "--no-keep-checkpoints",
                "--no-plot",
                "--no-progress",
            ]
        )
        print(indent(text), end="")
        if status != 0:
            raise SmokeFailure(f"resumed training exited with {status}")
        _check_resumed(smoke, checkpoint, run_dir / "checkpoint.pt")


def _check_resumed(smoke: Smoke, uninterrupted: Path, resumed: Path) -> None:
    import torch

    from lmspec.reference.training.checkpoint import read_checkpoint

    a, b = read_checkpoint(uninterrupted), read_checkpoint(resumed)
    same_model = a["model"].keys() == b["model"].keys() and all(
        torch.equal(a["model"][k], b["model"][k]) for k in a["model"]
    )
    same_optimizer = same_state(a["optimizer"], b["optimizer"])
    worst = max(float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"])
    smoke.facts["resume_bit_identical"] = same_model and same_optimizer
    smoke.check(
        "resume is bit-identical",
        same_model and same_optimizer and a["iteration"] == b["iteration"],
        f"step {b['iteration']} from the step-{TRAIN['checkpoint_interval']} checkpoint: "
        f"model {'==' if same_model else '!='}, optimizer {'==' if same_optimizer else '!='} "
        f"(max |diff| {worst:.3g})",
    )


def overfit_stage(smoke: Smoke, train_tokens: Any) -> None:
    """5c. A single small batch can be overfitted."""
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


def generate_stage(smoke: Smoke, tokenizer: Any, checkpoint: Path) -> None:
    """6. Sample with temperature and top-p from the final checkpoint."""
    with smoke.stage("generate"):
        import torch

        from lmspec.reference.generation import generate
        from lmspec.reference.nn import ModelConfig, TransformerLM
        from lmspec.reference.training.checkpoint import read_checkpoint

        payload = read_checkpoint(checkpoint)
        model = TransformerLM(ModelConfig(**payload["metadata"]["config"]["model"]))
        model.load_state_dict(payload["model"])
        model.eval()
        g = GENERATE
        new_ids = generate(
            model,
            tokenizer.encode(g["prompt"]),
            g["max_new_tokens"],
            temperature=g["temperature"],
            top_p=g["top_p"],
            eos_token_id=tokenizer.special_token_ids[EOT],
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
        print(indent("sample: " + repr(g["prompt"] + text)), end="")
