"""Benchmark 6: what starting costs, as whole processes.

- ``lmspec --help`` and every subcommand's ``--help``;
- ``import lmspec.reference.tokenizer`` (it must not import torch);
- the type-check hook: ``import lmspec.reference.nn`` with the checks on and
  off (``JAXTYPING_DISABLE=1``): what the hook costs where it checks;
- ``lmspec train-bpe`` on corpus.en at vocabulary 500 against HF
  ``tokenizers`` training the same, each a whole process, interleaved run by
  run so both see the same machine.

Medians of repeated runs; the ratio is of medians measured in the same run.
"""

import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lmspec.tools.bench.common import fixtures_dir, markdown_table, subprocess_env

HF_TRAIN = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<|endoftext|>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train([sys.argv[1]], trainer)
tok.save(sys.argv[2])
"""
COMMANDS = ("grade", "spec", "train-bpe", "encode", "train", "generate", "snapshots", "smoke", "bench", "mutants")


def _lmspec() -> list[str]:
    exe = shutil.which("lmspec")
    return [exe] if exe else [sys.executable, "-m", "lmspec"]


def _time(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env or subprocess_env(), capture_output=True, check=True, timeout=600)
    return time.perf_counter() - t0


def _median(cmd: list[str], repeats: int, env: dict[str, str] | None = None) -> float:
    return statistics.median(_time(cmd, env) for _ in range(repeats))


def run(*, quick: bool, log: Any) -> dict[str, Any]:
    repeats = 2 if quick else 7
    lmspec = _lmspec()
    out: dict[str, Any] = {"help_s": {}, "repeats": repeats}
    log("startup: --help")
    out["help_s"]["lmspec --help"] = _median([*lmspec, "--help"], repeats)
    for command in COMMANDS[:3] if quick else COMMANDS:
        out["help_s"][f"lmspec {command} --help"] = _median([*lmspec, command, "--help"], repeats)
    probe = "import sys, lmspec.reference.tokenizer; assert 'torch' not in sys.modules, 'torch was imported'"
    out["import_tokenizer_s"] = _median([sys.executable, "-c", probe], repeats)
    log("startup: the type-check hook")
    nn = [sys.executable, "-c", "import lmspec.reference.nn"]
    out["import_nn_checks_on_s"] = _median(nn, repeats, {**subprocess_env(), "JAXTYPING_DISABLE": "0"})
    out["import_nn_checks_off_s"] = _median(nn, repeats, {**subprocess_env(), "JAXTYPING_DISABLE": "1"})
    corpus = fixtures_dir()
    if corpus is None:
        out["train_bpe"] = "skipped: corpus.en not found (LMSPEC_FIXTURES)"
        return out
    if importlib.util.find_spec("tokenizers") is None:
        log("startup: Hugging Face tokenizers not installed (pip install -e .[bench]): train-bpe comparison skipped")
        out["train_bpe"] = "skipped: Hugging Face tokenizers not installed (pip install -e .[bench])"
        return out
    log("startup: train-bpe vs HF tokenizers, whole processes")
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "hf_train.py"
        script.write_text(HF_TRAIN)
        for _ in range(repeats + 3):
            ours.append(
                _time([*lmspec, "train-bpe", str(corpus / "corpus.en"), "--vocab-size", "500", "--out-dir", tmp])
            )
            theirs.append(_time([sys.executable, str(script), str(corpus / "corpus.en"), os.path.join(tmp, "hf.json")]))
    out["train_bpe"] = {
        "lmspec_s": statistics.median(ours),
        "hf_tokenizers_s": statistics.median(theirs),
        "ratio": statistics.median(ours) / statistics.median(theirs),
        "runs": len(ours),
    }
    return out


def tables(result: dict[str, Any]) -> str:
    rows = [[cmd, f"{s:.3f} s"] for cmd, s in result["help_s"].items()]
    rows.append(["import lmspec.reference.tokenizer (torch not imported)", f"{result['import_tokenizer_s']:.3f} s"])
    rows.append(["import lmspec.reference.nn, type checks on", f"{result['import_nn_checks_on_s']:.3f} s"])
    rows.append(["import lmspec.reference.nn, type checks off", f"{result['import_nn_checks_off_s']:.3f} s"])
    text = f"Whole processes, median of {result['repeats']} runs:\n\n" + markdown_table(["command", "wall"], rows)
    bpe = result["train_bpe"]
    if isinstance(bpe, dict):
        text += (
            f"\n\ntrain-bpe on corpus.en, vocabulary 500, whole process (median of {bpe['runs']}, interleaved): "
            f"lmspec {bpe['lmspec_s']:.3f} s, HF tokenizers {bpe['hf_tokenizers_s']:.3f} s, "
            f"ratio {bpe['ratio']:.2f}x"
        )
    else:
        text += f"\n\ntrain-bpe: {bpe}"
    return text
