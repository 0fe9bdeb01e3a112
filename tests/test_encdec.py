"""The encdec profile end to end: a codebase written in the style of the
common from-scratch notes (tests/fixture_repos/encdec_notes, with the adapter
file docs/encdec.md walks through) is recognised as encdec by its adapter's
names and passes every MUST test; the reference's conventions parse."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmspec.conformance.encdec.conventions import PAPER, parse
from lmspec.conformance.target import resolve
from lmspec.tools.mutants import bad_tests, run_suite
from lmspec.tools.smoke import encdec as smoke_encdec

REPO = Path(__file__).resolve().parent.parent
NOTES = REPO / "tests" / "fixture_repos" / "encdec_notes"


def test_notes_codebase_is_recognised_and_passes_every_must_test() -> None:
    target = resolve(str(NOTES))
    assert (target.profile, target.detected_by) == ("encdec", "names")
    assert target.adapter.endswith("encdec_adapters.py")
    report = run_suite(NOTES, None, allow_reference=False)
    assert report.get("import_error") is None, report["import_error"]
    must = [t for t in report["tests"] if t.get("strength") == "must"]
    assert len(must) > 100, report["output"]
    bad = bad_tests(report, "must")
    assert not bad, "\n".join(f"{t['nodeid']}: {t['summary']}" for t in bad[:10])
    # its label smoother takes (rows, vocab) only: the STRICT batched form is its one finding
    strict = {t["nodeid"].split("::")[-1] for t in bad_tests(report, "strict")}
    assert strict == {"test_label_smoothing_loss_batched"}, strict


def test_conventions_parse() -> None:
    assert parse(None) == PAPER
    assert parse({"norm": "pre"}).norm == "pre"
    for wrong in ({"norm": "sandwich"}, {"nrom": "pre"}, ["pre"]):
        try:
            parse(wrong)
        except ValueError:
            continue
        raise AssertionError(f"accepted {wrong!r}")


@pytest.mark.slow
def test_smoke_reverses_sequences(tmp_path: Path) -> None:
    """`lmspec smoke --profile encdec`: the reference learns the reversal task past the bar."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.smoke", "--profile", "encdec", "--out", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert proc.returncode == 0 and summary["ok"], proc.stdout[-3000:] + proc.stderr[-3000:]
    assert summary["greedy_exact"] > smoke_encdec.BAR and summary["untrained_exact"] < 0.05
