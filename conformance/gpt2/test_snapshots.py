"""Golden snapshots of the gpt2 profile (snapshots/gpt2/*.npz, listed in
snapshots/MANIFEST): fixed inputs, the book's ``cfg`` dicts and weights under
the book's state-dict keys, and the reference's float32 outputs, each checked
against the float64 oracle (oracles.py) when it was written (tools/snapshots.py).
An implementation must reproduce them in eval mode within twice the op's
float32 tolerance (the golden and the implementation each carry up to one
tolerance of float32 error)."""

import numpy as np
import pytest
import torch

from lmspec.conformance import tolerances
from lmspec.conformance.asserts import assert_close
from lmspec.conformance.snapshot_io import ROOT, manifest_entries, sha256, unpack
from lmspec.conformance.tolerances import Tolerance

MANIFEST_ENTRIES = manifest_entries("gpt2")


def _load(rel: str, digest: str):
    path = ROOT / rel
    if sha256(path.read_bytes()) != digest:
        pytest.fail(f"snapshot {rel} does not match its MANIFEST sha256: the golden file was changed", pytrace=False)
    with np.load(path, allow_pickle=False) as npz:
        return unpack(dict(npz))


def _params():
    for rel, digest in MANIFEST_ENTRIES:
        _, _, meta = _load(rel, digest)
        yield pytest.param(rel, digest, id=rel.removesuffix(".npz"), marks=pytest.mark.spec(meta["spec"]))


@pytest.mark.parametrize(("rel", "digest"), list(_params()))
def test_snapshot_reproduced(rel, digest, request):
    """The implementation reproduces the golden output on the stored inputs (eval mode)."""
    kwargs, expected, meta = _load(rel, digest)
    fn = request.getfixturevalue(meta["function"])
    out = fn(**kwargs)
    tol = getattr(tolerances, meta["tolerance"])
    tol = Tolerance(2 * tol.atol, 2 * tol.rtol, f"2 × {meta['tolerance']}")
    shapes = {k: tuple(v.shape) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    cfg = f", cfg {kwargs['cfg']}" if "cfg" in kwargs else ""
    assert_close(
        out,
        torch.from_numpy(expected),
        tol,
        rule=f"{meta['function']} reproduces snapshot {rel} (seed {meta['seed']})",
        context=f"shapes {shapes}{cfg}",
    )
