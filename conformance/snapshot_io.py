"""Reading and writing golden snapshots (snapshots/*.npz + MANIFEST).

Layout of one .npz: adapter tensor arguments as "arg.<name>", a weights dict
as "weights.<key>", other arguments (a gpt2 ``cfg`` dict too) as JSON in "scalars", the case's spec id,
adapter function and tolerance name as JSON in "meta", the golden output as
"expected". tools/snapshots.py writes them; conformance/cs336/test_snapshots.py (nn/),
conformance/gpt2/test_snapshots.py (gpt2/) and the grader read them.
"""

import hashlib
import io
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent / "snapshots"
MANIFEST = ROOT / "MANIFEST"


def pack(kwargs: dict[str, Any], expected: torch.Tensor, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            arrays[f"arg.{name}"] = value.numpy()
        elif isinstance(value, dict) and all(isinstance(v, torch.Tensor) for v in value.values()):
            arrays.update({f"weights.{k}": v.numpy() for k, v in sorted(value.items())})
        else:
            scalars[name] = value
    arrays["scalars"] = np.array(json.dumps(scalars, sort_keys=True))
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    arrays["expected"] = expected.detach().cpu().numpy()
    return arrays


def unpack(arrays: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], np.ndarray, dict[str, Any]]:
    """Adapter kwargs (tensors on CPU), the expected output and the case's meta
    (spec id, adapter function, tolerance name, seed)."""
    kwargs: dict[str, Any] = json.loads(str(arrays["scalars"]))
    weights = {
        k.removeprefix("weights."): torch.from_numpy(v.copy()) for k, v in arrays.items() if k.startswith("weights.")
    }
    for key, value in arrays.items():
        if key.startswith("arg."):
            kwargs[key.removeprefix("arg.")] = torch.from_numpy(value.copy())
    if weights:
        kwargs["weights"] = weights
    return kwargs, arrays["expected"], json.loads(str(arrays["meta"]))


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """A .npz with fixed member order and timestamps, so equal arrays give equal bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_manifest(path: Path = MANIFEST) -> dict[str, str]:
    """{relative path: sha256} from MANIFEST lines "sha256  path  notes..."."""
    entries = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, rel = line.split()[:2]
            entries[rel] = digest
    return entries


def manifest_entries(folder: str, path: Path = MANIFEST) -> list[tuple[str, str]]:
    """The sorted ``(relative path, sha256)`` MANIFEST entries under ``folder``
    (``nn`` for the cs336 profile, ``gpt2`` for the gpt2 profile)."""
    return sorted((rel, digest) for rel, digest in read_manifest(path).items() if rel.startswith(f"{folder}/"))
