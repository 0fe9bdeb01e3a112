"""The snapshot tool: goldens match their MANIFEST, regenerate from
reference/ (inputs bitwise, outputs within the op's tolerance), and any change
to a golden is reported."""

import shutil

import numpy as np

from lmspec.conformance import tolerances as T
from lmspec.conformance.snapshot_io import npz_bytes
from lmspec.tools import snapshot_cases as snapshots


def test_snapshots_have_no_drift():
    """verify --regenerate: hashes match and regenerating reproduces every golden."""
    assert snapshots.verify(check_regeneration=True) == []


def _stored(name: str) -> dict[str, np.ndarray]:
    with np.load(snapshots.ROOT / "nn" / f"{name}.npz") as npz:
        return {key: npz[key] for key in npz.files}


def test_output_rounding_across_machines_is_not_drift():
    """A golden written on another CPU (a few ulp off) still regenerates."""
    arrays = _stored("lm")
    arrays["expected"] = np.nextafter(arrays["expected"], np.float32(np.inf))  # one ulp up everywhere
    assert snapshots.regeneration_problems("lm", npz_bytes(arrays)) == []


def test_output_drift_beyond_tolerance_is_reported():
    """An output that moved by more than the op's tolerance is drift."""
    arrays = _stored("linear")
    arrays["expected"] = arrays["expected"] + np.float32(10 * T.LINEAR_F32.atol)
    problems = snapshots.regeneration_problems("linear", npz_bytes(arrays))
    assert any("disagrees with the float64 oracle" in p for p in problems), problems
    assert any("drifted from the stored golden" in p for p in problems), problems


def test_input_drift_is_reported(monkeypatch):
    """A generator whose inputs changed (another seed) no longer reproduces the golden."""
    data = (snapshots.ROOT / "nn" / "softmax.npz").read_bytes()
    monkeypatch.setitem(snapshots.CASES, "softmax", snapshots.CASES["softmax"]._replace(seed=99))
    problems = snapshots.regeneration_problems("softmax", data)
    assert problems and all("inputs drifted" in p for p in problems), problems
    assert any("arg.in_features" in p for p in problems), problems


def test_regenerated_npz_is_byte_stable():
    """Equal arrays give equal bytes (fixed member order and timestamps)."""
    assert snapshots.generate("rope") == snapshots.generate("rope")


def test_every_case_checked_against_float64_oracle(monkeypatch):
    """generate() refuses to write a golden that disagrees with the oracle."""
    case = snapshots.CASES["linear"]
    monkeypatch.setitem(snapshots.CASES, "linear", case._replace(oracle=lambda a: case.oracle(a) + 1.0))
    try:
        snapshots.generate("linear")
    except RuntimeError as exc:
        assert "disagrees with the float64 oracle" in str(exc)
    else:
        raise AssertionError("a golden contradicting the oracle was accepted")


def test_tampered_snapshot_is_reported(tmp_path):
    root = tmp_path / "snapshots"
    shutil.copytree(snapshots.ROOT, root)
    target = root / "nn" / "linear.npz"
    data = bytearray(target.read_bytes())
    data[-40] ^= 0xFF
    target.write_bytes(bytes(data))
    (root / "nn" / "rope.npz").unlink()
    problems = snapshots.verify(check_regeneration=False, root=root)
    assert any("linear.npz: sha256 differs" in p for p in problems), problems
    assert any("rope.npz: listed in MANIFEST but missing" in p for p in problems), problems


# --- the gpt2 profile's goldens (snapshots/gpt2, conformance/gpt2/test_snapshots.py)
def test_gpt2_tampered_golden_fails_the_sha_check(tmp_path):
    """One flipped byte in a gpt2 golden: verify reports it and the conformance test refuses the file."""
    import pytest

    from lmspec.conformance.gpt2 import test_snapshots as gpt2_snapshots

    root = tmp_path / "snapshots"
    shutil.copytree(snapshots.ROOT, root)
    target = root / "gpt2" / "mha.npz"
    data = bytearray(target.read_bytes())
    data[-40] ^= 0xFF
    target.write_bytes(bytes(data))
    problems = snapshots.verify(check_regeneration=False, root=root)
    assert problems == ["gpt2/mha.npz: sha256 differs from MANIFEST (file changed)"], problems
    digest = dict(gpt2_snapshots.MANIFEST_ENTRIES)["gpt2/mha.npz"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpt2_snapshots, "ROOT", root)
        with pytest.raises(pytest.fail.Exception, match="does not match its MANIFEST sha256"):
            gpt2_snapshots._load("gpt2/mha.npz", digest)


def test_gpt2_mutant_fails_the_snapshot_test(tmp_path, judge_server):
    """A LayerNorm with the unbiased variance (tests/mutants/gpt2_ln_unbiased_var.py)
    fails its golden, through the judge and its worker; the reference passes."""
    from lmspec import ROOT
    from lmspec.conformance.judge.launch import run_judge
    from lmspec.conformance.options import Settings
    from lmspec.conformance.target import resolve

    suite = str(ROOT / "conformance" / "gpt2" / "test_snapshots.py")
    settings = Settings(
        spec="gpt2.layernorm", suite=[suite], profile="gpt2", allow_reference=True, timeout=300.0, timeout_per_call=60.0
    )
    outcomes = {}
    for name, adapter in (
        ("mutant", str(ROOT / "tests" / "mutants" / "gpt2_ln_unbiased_var.py")),
        ("reference", "lmspec.reference.gpt2"),
    ):
        (tmp_path / name).mkdir()
        run = run_judge(resolve(adapter, "gpt2"), settings, tmp_path / name, server=judge_server)
        tests = (run.report or {}).get("tests") or []
        outcomes[name] = {t["nodeid"].split("::")[-1]: t["outcome"] for t in tests}
    assert outcomes["mutant"] == {"test_snapshot_reproduced[gpt2/layernorm]": "failed"}, outcomes
    assert outcomes["reference"] == {"test_snapshot_reproduced[gpt2/layernorm]": "passed"}, outcomes
