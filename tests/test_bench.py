"""``python -m tools.bench --quick`` runs end to end and writes its JSON (not a timed test).

Checks the machinery, not the numbers: every section ran, produced the fields
BENCHMARKS.md reads, and the three tokenizers agreed on the ids.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(900)
def test_bench_quick_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "bench-out"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--quick", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=880,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "bench.json").read_text())
    assert report["quick"] is True
    assert set(report["sections"]) == {"bpe", "encode", "train", "suite", "grading", "startup", "gradings"}
    assert "machine" in report and report["machine"]["logical_cpus"] >= 1

    bpe = report["sections"]["bpe"]["inputs"]
    assert bpe, "no BPE input was measured"
    for entry in bpe.values():
        assert entry["derived"]["single"]["ref_total_s"] > 0
        assert entry["ref_w1"]["merges"] > 0

    encode = report["sections"]["encode"]
    for rows in encode["throughput"].values():
        for impl in ("ref", "tiktoken", "hf"):
            if impl in rows:
                assert rows[impl]["same_ids_as_ref"], f"{impl} ids differ from the reference's"
                assert rows[impl]["mb_per_s"] > 0
    assert encode["memory"] and encode["memory"][0]["tokens"] > 0

    train = report["sections"]["train"]["devices"]["cpu"]
    for rows in train.values():
        native = rows["torch-native"]
        assert native["max_logit_diff_vs_ref"] < 1e-3, "torch-native twin != reference"
        for label in ("reference, checks off", "reference, checks on", "torch-native"):
            assert rows[label]["tokens_per_s"] > 0

    suite = report["sections"]["suite"]["runs"]
    assert suite and all(r["wall_s"]["median"] > 0 for r in suite.values())

    grading = report["sections"]["grading"]
    for modes in grading["per_call_s"].values():
        assert all(seconds > 0 for seconds in modes.values()) and "worker, no sandbox" in modes
    assert grading["startup_s"] and all(g["wall_s"] > 0 for g in grading["gradings"].values())

    startup = report["sections"]["startup"]
    assert startup["help_s"]["lmspec --help"] > 0 and startup["import_tokenizer_s"] > 0
    gradings = report["sections"]["gradings"]
    assert gradings["n"] == 1 and gradings["max_s"] > 0
    assert (out / "bench.md").read_text().startswith("# lmspec benchmarks")
