"""The snapshot tool: goldens match their MANIFEST, regenerate byte for byte
from reference/, and any change to a golden is reported."""

import shutil

from tools import snapshots


def test_snapshots_have_no_drift():
    """verify --regenerate: hashes match and regenerating gives the same bytes."""
    assert snapshots.verify(check_regeneration=True) == []


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
