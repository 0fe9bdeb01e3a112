"""SPEC §0, the from-scratch rule (SHOULD, audited; reported apart from the score).

Every adapter function is called on tiny inputs (conformance/cs336/calls.py)
while the worker records the torch definitions it reaches, and the sources
the worker imported from the submission are scanned; the profile's
from-scratch list (conformance/profiles/cs336.py) says which are findings.
How both checks work: conformance/audit.py.
"""

from pathlib import Path

import pytest

from lmspec.conformance import audit
from lmspec.conformance.cs336.calls import CALLS
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.profiles.cs336 import PROFILE

pytestmark = pytest.mark.spec("0.from_scratch")
assert set(PROFILE.core_functions) <= set(CALLS)


@pytest.mark.parametrize("name", list(CALLS))
def test_from_scratch_runtime(
    name: str, request: pytest.FixtureRequest, impl: Implementation, tmp_path: Path, record_property
) -> None:
    """The adapter function uses no forbidden torch.nn/functional/optim
    definition at run time (SPEC §0; recorded in the sandboxed worker)."""
    fn = request.getfixturevalue(name)  # skips: "not implemented: NAME" / "not provided: NAME"
    findings = audit.runtime_findings(
        impl, name, CALLS[name], fn, tmp_path, request.getfixturevalue, PROFILE.from_scratch
    )
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch rule (SPEC §0): {name} uses {audit.describe(findings)}"


def test_from_scratch_sources(impl: Implementation, record_property) -> None:
    """The sources reference no forbidden torch definition and patch no library (SPEC §0)."""
    findings = audit.source_findings(impl, PROFILE.from_scratch)
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch rule (SPEC §0): the sources use {audit.describe(findings)}"
