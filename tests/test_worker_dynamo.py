"""Neither the worker (for a submission's optimizer) nor the judge (for its
own optimizers and FLOP oracle) imports torch._dynamo
(conformance/judge/worker/dynamo.py): 2.5-3.9 CPU-seconds of a grading,
spent only to mark torch's functions for torch.compile. Each check runs in a
fresh interpreter (this one may have imported torch._dynamo already)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter with lmspec importable, from the repository."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
    )


# A student's AdamW in a style of its own (its own state keys, out-of-place moments),
# subclassing torch.optim.Optimizer as the handout asks.
ADAPTER = """
import math
import torch


class StudentAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with torch.no_grad():
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    s = self.state[p]
                    t = s["t"] = s.get("t", 0) + 1
                    m = s["m"] = b1 * s.get("m", torch.zeros_like(p)) + (1 - b1) * p.grad
                    v = s["v"] = b2 * s.get("v", torch.zeros_like(p)) + (1 - b2) * p.grad**2
                    a = group["lr"] * math.sqrt(1 - b2**t) / (1 - b1**t)
                    p *= 1 - group["lr"] * group["weight_decay"]
                    p -= a * m / (v.sqrt() + group["eps"])
        return loss


def get_adamw_cls():
    return StudentAdamW
"""

PROBE = """
import sys, torch
from lmspec.conformance.judge.worker import serve
from lmspec.conformance.judge.worker.__main__ import parse

server, ready = serve.start(parse(["--adapter", sys.argv[1], "--root", sys.argv[2]]), lambda *a: ([], True))
assert ready["error"] is None, ready["error"]

def run(cls):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = cls(model.parameters(), lr=1e-2, weight_decay=0.1)
    for _ in range(5):
        opt.zero_grad()
        model(torch.randn(2, 4)).square().sum().backward()
        opt.step()
    opt.load_state_dict(opt.state_dict())
    return opt, torch.cat([p.detach().flatten() for p in model.parameters()])

opt, student = run(server.module.get_adamw_cls())
print("imported before compile:", "torch._dynamo" in sys.modules)
torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))  # a submission that compiles
opt.zero_grad()
opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})
mark = getattr(torch.optim.Optimizer.add_param_group.__wrapped__, "__dynamo_disable")
print("torch's own mark after compile:", mark.__module__.startswith("torch._dynamo"))
_, reference = run(torch.optim.AdamW)
print("same parameters as torch.optim.AdamW:", torch.allclose(student, reference, atol=1e-6))
"""


def test_the_worker_leaves_torch_dynamo_unimported_until_the_submission_compiles(tmp_path: Path):
    (tmp_path / "adapters.py").write_text(ADAPTER)
    proc = _python(PROBE, str(tmp_path / "adapters.py"), str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        "imported before compile: False",
        "torch's own mark after compile: True",
        "same parameters as torch.optim.AdamW: True",
    ], proc.stdout


JUDGE = """
import sys, pytest
rc = pytest.main(["conformance", "--profile", "cs336", "-p", "no:cacheprovider", "-q", "-k", sys.argv[1]])
print(int(rc), "torch._dynamo" in sys.modules)
"""


def test_the_judge_leaves_torch_dynamo_unimported_for_its_flop_oracle_and_its_optimizers():
    """The judge's FLOP oracle (FlopCounterMode over decompositions on the meta device) and its
    stand-in optimizers (the checkpoint tests) meet the same wrappers (BENCHMARKS.md section 12)."""
    proc = _python(JUDGE, "flop_counter or checkpoint", timeout=600)
    assert proc.stdout.splitlines()[-1:] == ["0 False"], proc.stdout[-3000:] + proc.stderr[-2000:]


def test_a_torch_whose_wrapper_is_of_another_make_is_left_as_it_is():
    """An older torch (no ``_disable_dynamo``, or one that does not cache its mark): nothing is
    changed and nothing raises (the worker's start must not fail on it)."""
    proc = _python(
        """
        import torch
        from lmspec.conformance.judge.worker import dynamo
        torch._disable_dynamo = lambda fn=None, recursive=True: fn  # a wrapper that caches nothing
        print(dynamo.defer())
        del torch._disable_dynamo
        print(dynamo.defer())
        """
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["0", "0"], proc.stdout + proc.stderr[-2000:]
