"""Golden snapshots (snapshots/*.npz): fixed inputs and the reference's
float32 outputs, each checked against the float64 oracle when it was written
(tools/snapshots.py). An implementation must reproduce them within twice the
op's derived float32 tolerance (the golden and the implementation each carry
up to one tolerance of float32 error)."""

import numpy as np
import pytest
import torch

from lmspec.conformance import tolerances
from lmspec.conformance.asserts import assert_close
from lmspec.conformance.snapshot_io import ROOT, manifest_entries, sha256, unpack
from lmspec.conformance.tolerances import Tolerance

MANIFEST_ENTRIES = manifest_entries("nn")  # the gpt2 profile's are conformance/gpt2/test_snapshots.py's


def _load(rel: str, digest: str):
    path = ROOT / rel
    if sha256(path.read_bytes()) != digest:
        pytest.fail(f"snapshot {rel} does not match its MANIFEST sha256: the golden file was changed")
    with np.load(path, allow_pickle=False) as npz:
        return unpack(dict(npz))


def _params():
    for rel, digest in MANIFEST_ENTRIES:
        _, _, meta = _load(rel, digest)
        yield pytest.param(rel, digest, meta, id=rel.removesuffix(".npz"), marks=pytest.mark.spec(meta["spec"]))


@pytest.mark.parametrize(("rel", "digest", "meta"), list(_params()))
def test_snapshot_reproduced(rel, digest, meta, request, device):
    """The implementation reproduces the golden output on the stored inputs."""
    kwargs, expected, meta = _load(rel, digest)
    fn = request.getfixturevalue(meta["function"])
    moved = {
        k: (
            {n: w.to(device) for n, w in v.items()}
            if isinstance(v, dict)
            else v.to(device)
            if isinstance(v, torch.Tensor)
            else v
        )
        for k, v in kwargs.items()
    }
    out = fn(**moved)
    tol = getattr(tolerances, meta["tolerance"])
    tol = Tolerance(2 * tol.atol, 2 * tol.rtol, f"2 × {meta['tolerance']}")
    shapes = {k: tuple(v.shape) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    assert_close(
        out,
        torch.from_numpy(expected),
        tol,
        rule=f"{meta['function']} reproduces snapshot {rel} (seed {meta['seed']})",
        context=f"shapes {shapes}",
    )
