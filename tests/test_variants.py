"""Correct-but-different implementations must pass every test they run."""

import pytest

from tools.mutants import VARIANTS_DIR, discover
from tools.runsuite import failed, run_suite

VARIANTS = discover(VARIANTS_DIR, "VARIANT")


def test_at_least_three_variants():
    assert len(VARIANTS) >= 3


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_suite_accepts_variant(variant):
    data = run_suite(variant.path, variant.meta.get("run"), "--no-x")
    assert data.get("adapter_error") is None, data["adapter_error"]
    assert data["tests"], "no tests ran:\n" + data["output"]
    bad = failed(data)
    assert not bad, f"{variant.name} ({variant.meta['what']}) rejected:\n" + "\n".join(
        f"  {t['nodeid']}: {t['message']}" for t in bad[:10]
    )
