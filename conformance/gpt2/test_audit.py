"""SPEC §6.1 from-scratch list (audited, reported apart from the score): the
sources the worker imported from the submission, and the torch definitions a
forward pass of the model reaches; the profile's list
(conformance/profiles/gpt2.py) says which are findings (conformance/audit.py)."""

from pathlib import Path

import pytest
import torch

from lmspec.conformance import audit
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.profiles.gpt2 import PROFILE

pytestmark = pytest.mark.spec("gpt2.from_scratch")
CFG = o.cfg(context=6, layers=1)


def _model(fn, tmp_path, other):
    w = o.model_weights(torch.Generator().manual_seed(0), CFG)
    return fn(cfg=CFG, weights=w, in_idx=torch.zeros(1, 4, dtype=torch.long))


def _gelu(fn, tmp_path, other):
    return fn(in_features=torch.linspace(-2, 2, 8))


def _layernorm(fn, tmp_path, other):
    return fn(emb_dim=8, weights=None, in_features=torch.randn(1, 2, 8))


CALLS = {"gpt2_model": _model, "gpt2_gelu": _gelu, "gpt2_layernorm": _layernorm}


@pytest.mark.parametrize("name", list(CALLS))
def test_from_scratch_runtime(name, request, impl: Implementation, tmp_path: Path, record_property) -> None:
    """The model, GELU and LayerNorm reach no listed torch shortcut at run time."""
    fn = request.getfixturevalue(name)
    findings = audit.runtime_findings(
        impl, name, CALLS[name], fn, tmp_path, request.getfixturevalue, PROFILE.from_scratch
    )
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch list (SPEC §6.1): {name} uses {audit.describe(findings)}"


def test_from_scratch_sources(impl: Implementation, record_property) -> None:
    """The sources reference none of the book's built-from-scratch parts' torch shortcuts."""
    findings = audit.source_findings(impl, PROFILE.from_scratch)
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch list (SPEC §6.1): the sources use {audit.describe(findings)}"
