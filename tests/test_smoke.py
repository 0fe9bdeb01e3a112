"""The end-to-end smoke run (tools/smoke/, profile cs336) as a test.

The meaningful assertions live in tools/smoke/cs336.py, which exits non-zero when one
fails; here the run happens in a fresh process, as `nox -s smoke` runs it, and
its summary.json is read back and the key claims are checked again.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmspec.tools import smoke
from lmspec.tools.smoke import cs336, harness

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_smoke_run_end_to_end(tmp_path: Path) -> None:
    """BPE -> encode -> train -> resume in a new process -> overfit -> generate: all pass."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.smoke", "--out", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = proc.stdout[-4000:] + proc.stderr[-4000:]
    summary_path = tmp_path / "summary.json"
    assert summary_path.exists(), output
    summary = json.loads(summary_path.read_text())
    failed = [c for c in summary["checks"] if not c["ok"]]
    assert proc.returncode == 0 and summary["ok"] and not failed, f"{failed}\n{output}"

    # the claims, re-checked from the numbers
    assert summary["val_loss"] < summary["unigram_val_loss"] - cs336.BEAT_UNIGRAM_BY
    assert summary["unigram_val_loss"] < summary["uniform_loss"]
    assert summary["val_loss"] < summary["uniform_loss"] - cs336.BEAT_UNIFORM_BY
    assert summary["initial_val_loss"] > summary["uniform_loss"] - 0.5  # untrained ≈ ln V
    assert summary["resume_bit_identical"] is True
    assert summary["overfit_loss"] < cs336.OVERFIT["target"]
    assert isinstance(summary["sample"], str) and summary["sample"].startswith("The ")
    stages = {"train-bpe", "encode", "train", "resume (new process)", "generate"}
    assert stages <= set(summary["times"]), summary["times"]
    for name in ("run/log.jsonl", "run/checkpoint.pt", "resumed/checkpoint.pt", "data/val.npy"):
        assert (tmp_path / name).is_file(), name


def test_smoke_reports_a_failed_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage that cannot run fails the smoke run with status 1 and names the check."""

    def no_corpus(path: Path) -> str:
        raise harness.SmokeFailure(f"cannot write the corpus to {path}")

    monkeypatch.setattr(cs336, "write_corpus", no_corpus)
    status = smoke.main(["--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert status == 1
    assert "SMOKE FAILED: 1 check(s): stage ran" in captured.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ok"] is False
    assert "cannot write the corpus" in summary["checks"][-1]["detail"]


def test_smoke_profiles_are_the_package_modules(capsys: pytest.CaptureFixture[str]) -> None:
    """`--profile` picks a module of tools/smoke/ (cs336 by default); the harness is not one."""
    assert smoke.PROFILES[0] == "cs336" and not set(smoke.PROFILES) & smoke.SHARED
    assert smoke.build_parser().parse_args([]).profile == "cs336"
    with pytest.raises(SystemExit):
        smoke.main(["--profile", "harness"])
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.slow
def test_gpt2_smoke_run_end_to_end(tmp_path: Path) -> None:
    """``--profile gpt2``: the book's loader, model, schedule and generation on the
    TinyStories sample; the losses fall and text comes out."""
    from lmspec.tools.smoke import gpt2

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.smoke", "--profile", "gpt2", "--out", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = proc.stdout[-4000:] + proc.stderr[-4000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert proc.returncode == 0 and summary["ok"], output
    assert summary["train_loss"] < summary["initial_train_loss"] - gpt2.TRAIN_DROP_AT_LEAST
    assert summary["val_loss_gpt2"] < summary["initial_val_loss"] - gpt2.VAL_DROP_AT_LEAST
    assert summary["sample"].startswith(gpt2.PROMPT)
