"""SPEC §6.2 from-scratch list (SHOULD, audited; reported apart from the score).

Every adapter function is called on tiny inputs (calls.py) while the worker
records the torch definitions it reaches, and the sources the worker imported
are scanned; the profile's list says which are findings (nn.Transformer*,
nn.MultiheadAttention, nn.LayerNorm, F.layer_norm; Linear, Embedding,
Dropout and F.scaled_dot_product_attention are allowed).
"""

from pathlib import Path

import pytest

from lmspec.conformance import audit
from lmspec.conformance.encdec.calls import CALLS
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.profiles.encdec import PROFILE

pytestmark = pytest.mark.spec("encdec.from_scratch")
assert {f.name for f in PROFILE.functions} <= set(CALLS)


def _other(request: pytest.FixtureRequest):
    def get(name: str):
        try:
            return request.getfixturevalue(name)
        except pytest.skip.Exception:
            return None

    return get


@pytest.mark.parametrize("name", [n for n in CALLS if n != "get_conventions"])
def test_from_scratch_runtime(
    name: str, request: pytest.FixtureRequest, impl: Implementation, tmp_path: Path, record_property
) -> None:
    """The adapter function uses no definition the profile's list reports (recorded in the sandboxed worker)."""
    fn = request.getfixturevalue(name)
    findings = audit.runtime_findings(impl, name, CALLS[name], fn, tmp_path, _other(request), PROFILE.from_scratch)
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch list (SPEC §6.2): {name} uses {audit.describe(findings)}"


def test_from_scratch_sources(impl: Implementation, record_property) -> None:
    """The sources reference no definition the profile's list reports and patch no library."""
    findings = audit.source_findings(impl, PROFILE.from_scratch)
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch list (SPEC §6.2): {audit.describe(findings)}"
