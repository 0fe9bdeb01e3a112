"""Self-tests of the command line (reference/cli.py) and the training config.

``python -m reference train-bpe | encode | train | generate``: every option
has help with its default; bad input gives one ``error:`` line and exit
status 2, never a traceback; a tiny corpus goes through all four commands.
Commands run in-process through ``main(argv)`` except where the process
boundary is the point (``python -m``, Ctrl-C).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lmspec.reference.cli import main
from lmspec.reference.training.checkpoint import read_checkpoint
from lmspec.reference.training.config import ConfigError, TrainConfig

REPO = Path(__file__).resolve().parents[2]
EOT = "<|endoftext|>"
TINY_MODEL = [
    "--vocab-size",
    "300",
    "--context-length",
    "16",
    "--d-model",
    "32",
    "--num-layers",
    "1",
    "--num-heads",
    "2",
    "--d-ff",
    "64",
]


def _corpus_text() -> str:
    """About 40 KB of real English: Python's own documentation topics."""
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    return EOT.join(topics[k] for k in sorted(topics)[:12])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus, a tokenizer and train/val token files, built once through the CLI."""
    root = tmp_path_factory.mktemp("cli")
    (root / "corpus.txt").write_text(_corpus_text(), encoding="utf-8")
    assert (
        main(
            [
                "train-bpe",
                str(root / "corpus.txt"),
                "--vocab-size",
                "300",
                "--out-dir",
                str(root / "tok"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "encode",
                str(root / "corpus.txt"),
                "--tokenizer",
                str(root / "tok"),
                "--output",
                str(root / "train.npy"),
                "--val-fraction",
                "0.2",
                "--val-output",
                str(root / "val.npy"),
                "--no-progress",
            ]
        )
        == 0
    )
    return root


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def _train_argv(root: Path, out_dir: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--train-data",
        str(root / "train.npy"),
        "--val-data",
        str(root / "val.npy"),
        "--out-dir",
        str(out_dir),
        *TINY_MODEL,
        "--batch-size",
        "4",
        "--steps",
        "12",
        "--warmup-iters",
        "2",
        "--lr",
        "3e-3",
        "--min-lr",
        "3e-4",
        "--eval-interval",
        "6",
        "--eval-batches",
        "2",
        "--log-interval",
        "3",
        "--checkpoint-interval",
        "6",
        "--threads",
        "1",
        "--no-progress",
        *extra,
    ]


# --- help --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["train-bpe", "encode", "train", "generate"])
def test_help_lists_every_option(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`COMMAND --help` exits 0 and documents each option."""
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m reference {command}")
    expected = {
        "train-bpe": ["--vocab-size", "--special-token", "--out-dir", "--no-progress"],
        "encode": ["--tokenizer", "--output", "--val-fraction", "--val-output", "--doc-separator"],
        "train": [
            "--config",
            "--lr",
            "--min-lr",
            "--warmup-iters",
            "--betas",
            "--weight-decay",
            "--max-grad-norm",
            "--batch-size",
            "--steps",
            "--eval-interval",
            "--checkpoint-interval",
            "--resume",
            "--seed",
            "--device",
            "--dtype",
            "--vocab-size",
            "--context-length",
            "--d-model",
            "--num-layers",
            "--num-heads",
            "--d-ff",
            "--rope-theta",
        ],
        "generate": [
            "--checkpoint",
            "--tokenizer",
            "--prompt",
            "--temperature",
            "--top-p",
            "--max-new-tokens",
            "--seed",
        ],
    }[command]
    missing = [flag for flag in expected if flag not in out]
    assert not missing, f"{command} --help lacks {missing}"


def test_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """Defaults come from TrainConfig/ModelConfig and are printed next to each flag."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    defaults = TrainConfig(train_data="-")
    assert f"--lr X peak learning rate (alpha_max) (default: {defaults.lr})" in out
    assert f"(default: {defaults.model.d_model})" in out
    assert "--betas B1 B2 AdamW (beta1, beta2) (default: 0.9 0.95)" in out
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 0.9)" in out and "(default: 0.8)" in out  # top-p, temperature


def test_python_dash_m_entry_point() -> None:
    """`python -m reference` runs main() and reports bad input without a traceback."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reference",
            "train",
            "--train-data",
            "does/not/exist.npy",
            "--no-progress",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: train_data file 'does/not/exist.npy' does not exist"]


# --- bad input: one line, exit 2 ------------------------------------------------------


def _bad_input_cases(root: Path) -> dict[str, tuple[list[str], str]]:
    ckpt = root / "missing.pt"
    return {
        "train-bpe missing input": (
            ["train-bpe", str(root / "nope.txt"), "--vocab-size", "300", "--out-dir", str(root)],
            "does not exist",
        ),
        "train-bpe vocab too small": (
            [
                "train-bpe",
                str(root / "corpus.txt"),
                "--vocab-size",
                "100",
                "--out-dir",
                str(root / "t2"),
                "--no-progress",
            ],
            "vocab_size (100) must be at least 257",
        ),
        "argparse: bad int": (
            ["train-bpe", "x", "--vocab-size", "many", "--out-dir", "d"],
            "invalid int",
        ),
        "argparse: missing option": (["encode", "x.txt", "--output", "o.npy"], "--tokenizer"),
        "encode missing tokenizer": (
            [
                "encode",
                str(root / "corpus.txt"),
                "--tokenizer",
                str(root / "none"),
                "--output",
                str(root / "o.npy"),
            ],
            "vocab.json",
        ),
        "encode val fraction without output": (
            [
                "encode",
                str(root / "corpus.txt"),
                "--tokenizer",
                str(root / "tok"),
                "--output",
                str(root / "o.npy"),
                "--val-fraction",
                "0.1",
            ],
            "--val-output",
        ),
        "train invalid heads": (
            _train_argv(root, root / "r1", "--num-heads", "3"),
            "d_model (32) must be divisible by num_heads (3)",
        ),
        "train negative lr": (_train_argv(root, root / "r2", "--lr", "-1"), "lr (-1.0)"),
        "train warmup beyond steps": (
            _train_argv(root, root / "r3", "--warmup-iters", "50"),
            "warmup_iters (50) must be <= steps (12)",
        ),
        "train vocab smaller than data": (
            _train_argv(root, root / "r4", "--vocab-size", "100"),
            "outside the model's vocabulary [0, 100)",
        ),
        "train context longer than val": (
            _train_argv(root, root / "r5", "--context-length", "100000"),
            "needs at least 100001",
        ),
        "train bad device": (_train_argv(root, root / "r6", "--device", "nonsense"), "nonsense"),
        "train bad dtype": (_train_argv(root, root / "r7", "--dtype", "float8"), "dtype"),
        "train missing resume": (
            _train_argv(root, root / "r8", "--resume", str(ckpt)),
            "does not exist",
        ),
        "train missing config": (["train", "--config", str(root / "nope.json")], "does not exist"),
        "generate missing checkpoint": (
            ["generate", "--checkpoint", str(ckpt), "--tokenizer", str(root / "tok")],
            "does not exist",
        ),
        "generate bad top-p": (
            [
                "generate",
                "--checkpoint",
                str(ckpt),
                "--tokenizer",
                str(root / "tok"),
                "--top-p",
                "1.5",
            ],
            "--top-p (1.5) must be in (0, 1]",
        ),
    }


@pytest.mark.parametrize(
    "case",
    list(_bad_input_cases(Path("."))),
)
def test_bad_input_is_one_line_exit_2(case: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input: status 2 and a single `error: ...` line naming the problem."""
    argv, fragment = _bad_input_cases(workdir)[case]
    status, _, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]


def test_config_file_unknown_key_lists_valid_keys(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config file with an unknown key fails with the list of valid keys."""
    config = workdir / "bad.json"
    config.write_text(json.dumps({"train_data": "x.npy", "learning_rate": 0.1}))
    status, _, err = _run(["train", "--config", str(config)], capsys)
    assert status == 2
    assert "unknown config key(s) 'learning_rate'" in err and "valid keys: train_data" in err
    config.write_text(json.dumps({"train_data": "x.npy", "d_model": 64}))
    status, _, err = _run(["train", "--config", str(config)], capsys)
    assert status == 2 and "go under 'model'" in err


def test_config_file_and_flags_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TOML or JSON file first, flags on top (model keys merged one by one)."""
    toml = tmp_path / "run.toml"
    toml.write_text(
        'train_data = "a.npy"\nlr = 0.01\nmax_grad_norm = 2\n'
        "[model]\nvocab_size = 500\nd_model = 64\nnum_heads = 4\nd_ff = 128\n"
    )
    status, out, _ = _run(
        [
            "train",
            "--config",
            str(toml),
            "--lr",
            "0.02",
            "--num-layers",
            "3",
            "--max-grad-norm",
            "none",
            "--betas",
            "0.8",
            "0.9",
            "--print-config",
        ],
        capsys,
    )
    assert status == 0
    resolved = json.loads(out)
    assert resolved["lr"] == 0.02 and resolved["max_grad_norm"] is None
    assert resolved["betas"] == [0.8, 0.9]
    assert resolved["model"] | {} == resolved["model"]
    assert (resolved["model"]["vocab_size"], resolved["model"]["d_model"]) == (500, 64)
    assert resolved["model"]["num_layers"] == 3
    assert TrainConfig.from_dict(resolved).to_dict() == resolved


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"train_data": "a", "batch_size": "8"}, "batch_size must be int, got '8' (str)"),
        ({"train_data": "a", "batch_size": True}, "batch_size must be int, got True (bool)"),
        ({"train_data": "a", "betas": [0.9, 1.0]}, "betas[1] (1.0) must be in [0, 1)"),
        ({"train_data": "a", "min_lr": 0.1, "lr": 0.01}, "min_lr (0.1) must be <= lr (0.01)"),
        ({"train_data": "a", "model": {"d_modle": 8}}, "unknown model key(s) 'd_modle'"),
        ({"lr": 0.1}, "train_data is required"),
        ({"train_data": "a", "eval_batches": 0}, "eval_batches (0) must be >= 1"),
    ],
)
def test_train_config_errors_name_values(data: dict, message: str) -> None:
    """TrainConfig validation raises ConfigError naming the field and its value."""
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict(data)
    assert message in str(info.value)


# --- the round trip ---------------------------------------------------------------------


def test_train_bpe_encode_train_generate(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tiny corpus through all four commands; train resumes; generate prints text."""
    train_tokens = np.load(workdir / "train.npy", mmap_mode="r")
    val_tokens = np.load(workdir / "val.npy", mmap_mode="r")
    vocab = json.loads((workdir / "tok" / "vocab.json").read_text(encoding="utf-8"))
    assert len(vocab) == 300 and vocab[EOT] == 256
    assert train_tokens.dtype == np.uint16 and int(train_tokens[-1]) == 256  # cut after a document
    assert 0.1 < len(val_tokens) / (len(train_tokens) + len(val_tokens)) < 0.3

    run = workdir / "run"
    status, out, err = _run(_train_argv(workdir, run, "--steps", "6"), capsys)
    assert status == 0, err
    assert "done at step 6/6" in out
    status, out, err = _run(_train_argv(workdir, run, "--resume", "auto"), capsys)
    assert status == 0, err
    assert "resumed from" in err + out and "done at step 12/12" in out
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 3, 6, 9, 12]
    assert records[0]["val_loss"] is not None and records[0]["train_loss"] is None
    assert all(r["train_loss"] > 0 for r in records[1:])
    assert read_checkpoint(run / "checkpoint.pt")["iteration"] == 12
    if (run / "loss.png").exists():
        assert (run / "loss.png").read_bytes()[:4] == b"\x89PNG"

    status, out, err = _run(
        [
            "generate",
            "--checkpoint",
            str(run / "checkpoint.pt"),
            "--tokenizer",
            str(workdir / "tok"),
            "--prompt",
            "The ",
            "--max-new-tokens",
            "10",
            "--seed",
            "1",
        ],
        capsys,
    )
    assert status == 0, err
    assert "tokens in" in err and "temperature 0.8, top-p 0.9, seed 1" in err
    assert isinstance(out, str) and out.endswith("\n")
    again = _run(
        [
            "generate",
            "--checkpoint",
            str(run / "checkpoint.pt"),
            "--tokenizer",
            str(workdir / "tok"),
            "--prompt",
            "The ",
            "--max-new-tokens",
            "10",
            "--seed",
            "1",
        ],
        capsys,
    )
    assert again[1] == out, "the same seed must give the same completion"


def test_resume_matches_uninterrupted_run(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """6 steps + resume to 12 == 12 steps straight: parameters and optimizer, bit for bit.

    The schedule's horizon is pinned (--cosine-cycle-iters 12): with the default
    (= --steps) a 6-step run would follow a different learning-rate curve.
    """
    straight, split = workdir / "straight", workdir / "split"
    pin = ("--cosine-cycle-iters", "12", "--no-plot")
    assert _run(_train_argv(workdir, straight, *pin), capsys)[0] == 0
    assert _run(_train_argv(workdir, split, "--steps", "6", *pin), capsys)[0] == 0
    assert _run(_train_argv(workdir, split, "--resume", "auto", *pin), capsys)[0] == 0
    a, b = read_checkpoint(straight / "checkpoint.pt"), read_checkpoint(split / "checkpoint.pt")
    assert a["iteration"] == b["iteration"] == 12
    different = [k for k in a["model"] if not torch.equal(a["model"][k], b["model"][k])]
    assert not different, f"parameters differ after resume: {different}"
    for pid, state in a["optimizer"]["state"].items():
        other = b["optimizer"]["state"][pid]
        assert state["step"] == other["step"]
        assert torch.equal(state["exp_avg"], other["exp_avg"])
        assert torch.equal(state["exp_avg_sq"], other["exp_avg_sq"])
    log_a = (straight / "log.jsonl").read_text().splitlines()
    log_b = (split / "log.jsonl").read_text().splitlines()
    strip = lambda lines: [{**json.loads(x), "elapsed_s": None} for x in lines]
    assert strip(log_a) == strip(log_b), "the resumed log must match the uninterrupted one"


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_resume_finishes(workdir: Path) -> None:
    """SIGINT during `train`: the step finishes, a checkpoint is saved, exit 130;
    `--resume auto` then completes the run."""
    run = workdir / "interrupted"
    argv = _train_argv(workdir, run, "--steps", "100000", "--log-interval", "1", "--no-plot")
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "reference", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = run / "log.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= 3:  # step 0, 1, 2 logged
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted at step" in out
    step = read_checkpoint(run / "checkpoint.pt")["iteration"]
    assert step >= 2
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records[-1]["step"] == step
    assert main([*argv[:-1], "--steps", str(step + 2), "--resume", "auto", "--no-plot"]) == 0
    assert read_checkpoint(run / "checkpoint.pt")["iteration"] == step + 2


def test_crash_mid_run_saves_the_last_completed_step(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN loss at step 5: exit 2 with one error line, and a checkpoint of step 4
    (the batch of the failed step is not consumed: resuming replays it)."""
    import lmspec.reference.training.loop as loop

    real = loop.cross_entropy
    calls = {"n": 0}

    def nan_at_fifth_training_step(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():  # evaluations run under inference mode
            calls["n"] += 1
            if calls["n"] == 5:
                return real(logits, targets) * float("nan")
        return real(logits, targets)

    monkeypatch.setattr(loop, "cross_entropy", nan_at_fifth_training_step)
    run = workdir / "crash"
    status, out, err = _run(_train_argv(workdir, run, "--no-plot"), capsys)
    assert status == 2
    assert err.strip().splitlines()[-1].startswith("error: training loss is nan at step 5")
    assert "checkpoint of step 4 saved" in out
    saved = read_checkpoint(run / "checkpoint.pt")
    assert saved["iteration"] == 4

    monkeypatch.setattr(loop, "cross_entropy", real)
    straight = workdir / "no-crash"
    pin = ("--cosine-cycle-iters", "12", "--no-plot")
    assert _run(_train_argv(workdir, straight, *pin), capsys)[0] == 0
    assert _run(_train_argv(workdir, run, "--resume", "auto", *pin), capsys)[0] == 0
    a = read_checkpoint(straight / "checkpoint.pt")["model"]
    b = read_checkpoint(run / "checkpoint.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed crash run must match"
