"""The reference's runtime type checks (reference/__init__.py): jaxtyping's
import hook instruments the modules of ``CHECKED``, and only those."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmspec.reference import CHECKED, TYPECHECKED

REPO = Path(__file__).resolve().parents[2]

#: In a fresh process: every checked module imported (the adapters first, before anything has imported
#: torch), then the modules outside CHECKED whose bytecode was looked up under jaxtyping's tag.
_PROBE = """
import importlib, json, sys
from lmspec.reference import CHECKED
assert "torch" not in sys.modules
for name in ("lmspec.reference.adapter", *CHECKED):
    importlib.import_module(name)
tagged = sorted(
    name for name, module in list(sys.modules.items())
    if ".opt-jaxtyping" in str(getattr(module, "__dict__", {}).get("__cached__") or "") and not name.startswith(CHECKED)
)
print(json.dumps({"tagged": tagged, "torch": "torch" in sys.modules}))
"""


def _probe() -> dict:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, env=environment, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.skipif(not TYPECHECKED, reason="JAXTYPING_DISABLE is set: no hook to test")
def test_only_the_checked_modules_are_compiled_under_jaxtypings_tag() -> None:
    """jaxtyping keeps an instrumented module's bytecode under a tag of its own; the modules that
    module imports (torch, the standard library) keep theirs. They were compiled afresh in every
    process that imported a reference module before torch (3.5 CPU-s here) or cached twice."""
    seen = _probe()
    assert seen["torch"] and seen["tagged"] == [], seen["tagged"][:20]


@pytest.mark.skipif(not TYPECHECKED, reason="JAXTYPING_DISABLE is set: no hook to test")
def test_checked_modules_check_their_arguments() -> None:
    """A float function given integers is refused by the instrumented reference, not computed."""
    from jaxtyping import TypeCheckError

    from lmspec.reference.nn.activations import silu

    assert "lmspec.reference.nn" in CHECKED
    silu(torch.zeros(3))
    with pytest.raises(TypeCheckError):
        silu(torch.zeros(3, dtype=torch.int64))
