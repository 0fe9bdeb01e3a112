"""``RemoteFunction.repeat``: n calls in one round trip to the worker
(conformance/judge/worker/server.py, op "call" with "repeat") behave as n
calls one by one: each gets its own copies of the arguments, a written-back
generator is drawn from by each in turn, mutations are reported as for one
call, and the per-call time limit holds for each call, not for the request.
Through the real worker (bubblewrap where it works)."""

import time
from pathlib import Path

import pytest
import torch

from lmspec.conformance.judge import sandbox
from lmspec.conformance.judge.faults import Fault, WorkerFault
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.judge.remote import RemoteFunction
from lmspec.conformance.profiles import Function

ADAPTER = """
import time
import torch

calls = []


def draw(logits, generator):
    logits /= 2.0  # in place: a second call on the same tensor would sample from other logits
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[0]


def wait(seconds, hang_at):
    calls.append(seconds)
    time.sleep(3600 if len(calls) == hang_at else seconds)
    return len(calls)
"""

FUNCTIONS = {
    "draw": Function("draw", ("logits", "generator"), positional=2, writeback=("generator",)),
    "wait": Function("wait", ("seconds", "hang_at"), positional=2),
}


@pytest.fixture
def impl(tmp_path: Path):
    (tmp_path / "adapters.py").write_text(ADAPTER)
    kind, _ = sandbox.resolve("auto")
    spec = sandbox.WorkerSpec(adapter=str(tmp_path / "adapters.py"), root=tmp_path, sandbox=kind)
    implementation = Implementation(spec, FUNCTIONS, call_timeout=1.5)
    yield implementation
    implementation.close()


def test_repeat_gives_what_calls_one_by_one_give(impl: Implementation):
    draw = RemoteFunction(impl, "draw")
    logits = [0.5, -1.0, 2.0, 0.0, 1.0]
    one_by_one_gen = torch.Generator().manual_seed(7)
    one_by_one = [int(draw(torch.tensor(logits), one_by_one_gen)) for _ in range(300)]
    single_mutations = draw.last_mutations
    repeated_gen = torch.Generator().manual_seed(7)
    repeated = [int(t) for t in draw.repeat(300, torch.tensor(logits), repeated_gen)]
    assert repeated == one_by_one
    assert len(set(repeated)) > 1  # the generator moved on between calls
    assert torch.equal(repeated_gen.get_state(), one_by_one_gen.get_state())
    assert single_mutations and draw.last_mutations == single_mutations


def test_the_time_limit_holds_per_call_not_per_request(impl: Implementation):
    wait = RemoteFunction(impl, "wait")
    start = time.monotonic()
    assert wait.repeat(5, 0.5, 0) == [1, 2, 3, 4, 5]  # 2.5 s in all, each call within the 1.5 s limit
    assert time.monotonic() - start > 2.5
    start = time.monotonic()
    with pytest.raises(WorkerFault) as caught:
        wait.repeat(5, 0.01, 8)  # the 3rd call of this request hangs (calls counted from the first request)
    assert caught.value.fault is Fault.TIMEOUT
    assert time.monotonic() - start < 10
