"""What a judge pays for per grading that it need not (issue 29, BENCHMARKS.md section 11)."""

import subprocess
import sys

from lmspec import ROOT

#: A mismatch described in a fresh interpreter that has imported what a judge imports: the worst element's
#: index, and whether describing it imported torch.fx's symbolic shapes (and sympy with them).
_DESCRIBE = """
import sys
import torch
from lmspec.conformance.asserts import describe_mismatch
from lmspec.conformance.tolerances import Tolerance

expected = torch.zeros(2, 3, 4)
actual = expected.clone()
actual[1, 2, 0] = 5.0
actual[0, 1, 3] = 1.0
print(describe_mismatch(actual, expected, Tolerance(atol=1e-4, rtol=1e-4)))
print(sorted(m for m in ("sympy", "torch.fx.experimental.symbolic_shapes") if m in sys.modules))
"""


def test_a_mismatch_is_described_without_importing_sympy() -> None:
    """torch.unravel_index checks its arguments through torch._check, whose first call imports
    torch.fx's symbolic shapes and sympy: 0.7-1.4 CPU-seconds in every judge that reports a
    mismatch, that is in every grading of a mutant. The worst element is found without it."""
    out = subprocess.run(
        [sys.executable, "-c", _DESCRIBE], capture_output=True, text=True, timeout=300, check=True, cwd=ROOT
    ).stdout.splitlines()
    assert out[0].startswith("max |error| 5; worst at [1, 2, 0]: got 5, expected 0 (error 5); 2/24 elements"), out
    assert out[1] == "[]", out


#: The phases of the Hypothesis profiles the judge's plugin registers, in a fresh interpreter (loading the
#: plugin loads a profile: not in the test process).
_PHASES = """
from hypothesis import settings
import lmspec.conformance.plugin
for name in ("ci", "dev", "thorough"):
    print(name, sorted(p.name for p in settings.get_profile(name).phases))
"""


def test_a_failing_test_is_not_rerun_to_explain_it() -> None:
    """Hypothesis' explain phase re-runs a failing test (0.5-4.5 s each, the submission's calls included)
    to list the lines only failing cases ran (the suite's own asserts) and mark the arguments that do not
    matter. The profiles a grading runs under leave it out; "thorough" keeps it."""
    out = subprocess.run(
        [sys.executable, "-c", _PHASES], capture_output=True, text=True, timeout=300, check=True, cwd=ROOT
    ).stdout.splitlines()
    phases = {line.split()[0]: line.split(" ", 1)[1] for line in out}
    for name in ("ci", "dev"):
        assert "explain" not in phases[name] and "'shrink'" in phases[name] and "'generate'" in phases[name], out
    assert "explain" in phases["thorough"], out
