"""SPEC §3 data loading and checkpointing: get_batch (shapes, shift, device,
memmap, every start reachable, uniform) and save/load_checkpoint (round trip,
exact resume).

The uniformity test is statistical with a computed false-failure probability
(≤ 1e-6 for any seed; derivation in conformance/stats.py); it seeds torch,
numpy and ``random`` first so CI is deterministic.
"""

import copy
import io
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from lmspec.conformance import hints, stats
from lmspec.conformance.asserts import assert_close, assert_dtype, assert_equal, assert_shape, describe_mismatch
from lmspec.conformance.cs336.oracles.training import KNOWN_BUGS
from lmspec.conformance.tolerances import EXACT

spec = pytest.mark.spec


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


@pytest.fixture
def seeded():
    """Seed every global RNG an implementation may use; restore torch's after."""
    with torch.random.fork_rng(devices=[]):
        state_np, state_py = np.random.get_state(), random.getstate()
        _seed_everything(1234)
        yield
        np.random.set_state(state_np)
        random.setstate(state_py)


def _starts(inputs: torch.Tensor, targets: torch.Tensor, data: np.ndarray, m: int, what: str) -> list[int]:
    """Start index of every row, checking that inputs = x[s:s+m] and targets =
    x[s+1:s+m+1] for one valid s (``data`` holds distinct values)."""
    __tracebackhide__ = True
    x = torch.as_tensor(np.asarray(data, dtype=np.int64))
    pos = {int(v): i for i, v in enumerate(x.tolist())}
    n_valid = len(data) - m
    inputs, targets = inputs.detach().cpu(), targets.detach().cpu()
    starts = []
    for row in range(inputs.shape[0]):
        s = pos.get(int(inputs[row, 0]))
        if s is None or not 0 <= s < n_valid:
            raise AssertionError(
                f"3.get_batch ({what}): row {row} starts with token {int(inputs[row, 0])}, "
                f"at position {s}; "
                f"valid starts are 0..{n_valid - 1} (len(x) − context_length − 1)"
            )
        if not torch.equal(inputs[row], x[s : s + m]):
            raise AssertionError(f"3.get_batch ({what}): row {row} inputs {inputs[row].tolist()} != x[{s}:{s + m}]")
        if not torch.equal(targets[row], x[s + 1 : s + m + 1]):
            # exact: name another start only when the targets row is that slice
            t = pos.get(int(targets[row, 0])) if targets.shape[-1] == m and targets[row].numel() else None
            slice_at_t = t is not None and t + m <= len(x) and torch.equal(targets[row], x[t : t + m])
            hint = (
                f"; likely cause: targets are x[{t}:{t + m}], taken at start {t} instead of {s + 1}"
                if slice_at_t
                else ""
            )
            raise AssertionError(
                f"3.get_batch ({what}): row {row} targets {targets[row].tolist()} must be "
                f"x[{s + 1}:{s + m + 1}] "
                f"= {x[s + 1 : s + m + 1].tolist()} (inputs shifted by one){hint}"
            )
        starts.append(s)
    return starts


def _datasets(tmp_path: Path) -> dict[str, np.ndarray]:
    """Distinct values (so a row reveals its start) in the layouts users pass."""
    values = np.arange(40) * 7 + 3
    npy = tmp_path / "tokens.npy"
    np.save(npy, values.astype(np.int32))
    raw = tmp_path / "tokens.bin"
    values.astype(np.uint16).tofile(raw)
    return {
        "ndarray-int64": values.astype(np.int64),
        "npy-int32-mmap": np.load(npy, mmap_mode="r"),
        "memmap-uint16": np.memmap(raw, dtype=np.uint16, mode="r"),
    }


@spec("3.get_batch")
@pytest.mark.parametrize("kind", ["ndarray-int64", "npy-int32-mmap", "memmap-uint16"])
def test_get_batch_shapes_dtype_device_and_shift(run_get_batch, device, tmp_path, kind, seeded):
    """inputs x[s:s+m] and targets x[s+1:s+m+1] from the same start s, both int64
    (batch_size, context_length) on ``device``, for arrays and np.memmap."""
    datasets = _datasets(tmp_path)
    data = datasets[kind]
    batch_size, m = 6, 5
    inputs, targets = run_get_batch(data, batch_size, m, device)
    # the dtype switch's second input: another array whose dtype is not int64
    second = datasets[hints.other(kind, "memmap-uint16", "npy-int32-mmap")]

    def keeps_dtype(array, outputs) -> list[str]:
        same = all(getattr(t, "dtype", None) == torch.from_numpy(array[:1].copy()).dtype for t in outputs)
        return ["the array's dtype kept (torch.from_numpy without a cast): convert to int64"] if same else []

    for name, t in (("inputs", inputs), ("targets", targets)):
        assert_shape(t, (batch_size, m), rule=f"3.get_batch: {name} shape (batch_size, context_length)")
        hints.failing_with_causes(
            lambda t=t, name=name: assert_dtype(t, torch.int64, rule=f"3.get_batch: {name} dtype ({kind} input)"),
            lambda: hints.confirmed(
                keeps_dtype(data, (inputs, targets)),
                lambda: keeps_dtype(second, run_get_batch(second, batch_size, m, device)),
            ),
        )
        assert t.device.type == torch.device(device).type, f"3.get_batch: {name} on {t.device}, expected {device}"
    _starts(inputs, targets, data, m, kind)


def _check_invalid_device_raises(run_get_batch, bad: str) -> None:
    __tracebackhide__ = True
    data = np.arange(50, dtype=np.int64)
    try:
        run_get_batch(data, 2, 4, bad)
    except Exception:
        return
    raise AssertionError(f"3.get_batch: device={bad!r} must raise an error; the call returned normally")


@spec("3.get_batch")
def test_get_batch_invalid_device_raises(run_get_batch):
    """An invalid device ordinal (the official test's "cuda:99") must raise,
    never silently fall back to cpu."""
    _check_invalid_device_raises(run_get_batch, "cuda:99")


@spec("3.get_batch")
@pytest.mark.strict
def test_get_batch_malformed_device_raises(run_get_batch):
    """STRICT: a device string that names no device type at all ("nonsense")
    raises too."""
    _check_invalid_device_raises(run_get_batch, "nonsense")


@spec("3.get_batch")
def test_get_batch_reads_memmap_without_loading_it(run_get_batch, impl, tmp_path, seeded):
    """A 64 MiB np.memmap (sparse file) is sampled without reading it whole:
    the peak resident memory of the implementation's process (its VmHWM,
    reset first, read by the judge from /proc) grows far less than the array."""
    size = 64 * 2**20
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: costs no disk and no time
    data = np.memmap(path, dtype=np.uint16, mode="r")
    limit_kib = (size // 8) >> 10
    run_get_batch(np.arange(100, dtype=np.uint16), 8, 16, "cpu")  # warm-up: lazy imports and caches
    try:
        impl.reset_peak()
        before = impl.memory_kib()["VmRSS"]
    except (OSError, RuntimeError, KeyError) as exc:
        pytest.skip(f"peak-memory measurement needs Linux /proc of the worker: {exc}")
    inputs, _ = run_get_batch(data, 8, 16, "cpu")
    growth = impl.memory_kib()["VmHWM"] - before
    assert_shape(inputs, (8, 16), rule="3.get_batch: inputs shape on a memmap")
    assert growth < limit_kib, (
        f"3.get_batch: sampling 8×16 tokens from a {size >> 20} MiB memmap raised the peak resident "
        f"memory by {growth >> 10} MiB (limit {limit_kib >> 10} MiB)\n"
        "  likely cause: the whole array was copied or converted (np.array(x), x.astype(...), "
        "torch.tensor(x)); index the memmap (or torch.from_numpy(x)) per start instead"
    )


@spec("3.get_batch")
def test_get_batch_every_valid_start_reachable(run_get_batch, seeded):
    """Every start 0..len(x)−m−1 is drawn (the last one included) and no other.
    A correct sampler misses a start in 1000 rows with probability
    ≤ 10·(1−1/10)^1000 < 1e-45 (batches never exceed the number of starts, so
    sampling without replacement inside a batch is fine too)."""
    m, n_starts, calls = 4, 10, 100
    data = np.arange(n_starts + m, dtype=np.int64) + 100
    assert stats.miss_probability(n_starts, 1 / n_starts, calls * n_starts) < stats.FALSE_FAILURE
    seen: set[int] = set()
    for _ in range(calls):
        inputs, targets = run_get_batch(data, n_starts, m, "cpu")
        seen |= set(_starts(inputs, targets, data, m, "reachability"))
    missing = sorted(set(range(n_starts)) - seen)
    if missing:
        # the rows are the evidence: 1000 draws, exactly the last (or the first) start missing
        never = {(n_starts - 1,): "the last valid start", (0,): "start 0 is never drawn"}.get(tuple(missing))
        hint = hints.likely_causes([c for c in KNOWN_BUGS.causes("3.get_batch") if never and c.startswith(never)])
        raise AssertionError(
            f"3.get_batch: starts {missing} never drawn in {calls * n_starts} rows "
            f"(len(x)={len(data)}, m={m}; "
            f"valid starts 0..{n_starts - 1}){hint}"
        )


@spec("3.get_batch")
def test_get_batch_starts_uniform(run_get_batch, seeded):
    """Start indices are uniform over 0..len(x)−m−1: per-start counts and the
    empirical CDF over 8000 rows (500 batches of 16) pass Chernoff bounds whose
    union has false-failure probability ≤ 1e-6 (conformance/stats.py)."""
    n_starts = 16
    counts = _start_counts(run_get_batch, n_starts)
    problem = stats.check_distribution(counts, [1 / n_starts] * n_starts, labels="start")
    causes = (
        hints.confirmed(_start_causes(counts), lambda: _start_causes(_start_counts(run_get_batch, 11)))
        if problem
        else []
    )
    assert problem is None, (
        f"3.get_batch: starts are not uniform: {problem}{hints.likely_causes(causes)}\n  counts per start: {counts}"
    )


def _start_counts(run_get_batch, n_starts: int, m: int = 3, batch: int = 16, calls: int = 500) -> list[int]:
    """How often each of the ``n_starts`` valid starts is drawn in ``calls`` batches."""
    data = np.arange(n_starts + m, dtype=np.int64) * 3 + 1
    counts = [0] * n_starts
    for _ in range(calls):
        inputs, targets = run_get_batch(data, batch, m, "cpu")
        for s in _starts(inputs, targets, data, m, "uniformity"):
            counts[s] += 1
    return counts


def _start_causes(counts: list[int]) -> list[str]:
    """The start-distribution switches (oracles/training.py) the counts pass the uniform test's check against."""
    return [
        cause
        for cause, replay in KNOWN_BUGS.causes("3.get_batch").items()
        if stats.check_distribution(counts, replay(len(counts)), labels="start") is None
    ]


# --- checkpointing ------------------------------------------------------------------------
class _Tiny(torch.nn.Module):
    """A small model built only from Module/Parameter containers, so failures
    isolate checkpointing from the implementation's LM."""

    def __init__(self, seed: int):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.inp = torch.nn.Parameter(torch.randn(8, 5, generator=gen) * 0.5)
        self.blocks = torch.nn.ModuleList(_Inner(gen) for _ in range(2))
        self.out = torch.nn.Parameter(torch.randn(3, 8, generator=gen) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x @ self.inp.T)
        for block in self.blocks:
            h = block(h)
        return h @ self.out.T


class _Inner(torch.nn.Module):
    def __init__(self, gen: torch.Generator):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8, generator=gen) * 0.3)
        self.g = torch.nn.Parameter(torch.ones(8))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + torch.tanh(h @ self.w.T) * self.g


HYPER = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}


@pytest.fixture(scope="module")
def adamw_cls(request):
    """The implementation's AdamW; torch.optim.AdamW when it has none, so the
    checkpoint tests still isolate checkpointing."""
    try:
        return request.getfixturevalue("get_adamw_cls")()
    except pytest.skip.Exception:
        return torch.optim.AdamW


def _batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(99)
    return [(torch.randn(4, 5, generator=gen), torch.randn(4, 3, generator=gen)) for _ in range(n)]


def _train(model: torch.nn.Module, opt, batches) -> None:
    for x, y in batches:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()


def _params(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _targets(tmp_path: Path):
    """(write target, read source) pairs: str path, pathlib.Path, BytesIO."""
    buf = io.BytesIO()

    def rewind():
        buf.seek(0)
        return buf

    return {
        "str-path": (str(tmp_path / "ckpt.pt"), lambda: str(tmp_path / "ckpt.pt")),
        "pathlib-path": (tmp_path / "ckpt2.pt", lambda: tmp_path / "ckpt2.pt"),
        "bytesio": (buf, rewind),
    }


def _same_structure(a, b, where: str = "state_dict") -> str | None:
    """None when the two nested optimizer state dicts are equal (tensors bit-exact)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        ok = (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and torch.equal(a.cpu(), b.cpu())
        )
        return None if ok else f"{where}: {a!r} != {b!r}"
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{where}: keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for k in a:
            problem = _same_structure(a[k], b[k], f"{where}[{k!r}]")
            if problem:
                return problem
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            problem = _same_structure(x, y, f"{where}[{i}]")
            if problem:
                return problem
        return None
    return None if a == b else f"{where}: {a!r} != {b!r}"


@spec("3.checkpoint")
@pytest.mark.parametrize("target", ["str-path", "pathlib-path", "bytesio"])
def test_checkpoint_round_trip(run_save_checkpoint, run_load_checkpoint, adamw_cls, tmp_path, target):
    """save_checkpoint then load_checkpoint into a fresh model and optimizer
    restores the parameters, the optimizer state and the iteration."""
    model = _Tiny(0)
    opt = adamw_cls(model.parameters(), **HYPER)
    _train(model, opt, _batches(3))
    out, src = _targets(tmp_path)[target]
    run_save_checkpoint(model, opt, 3, out)
    fresh = _Tiny(1)
    fresh_opt = adamw_cls(fresh.parameters(), **HYPER)
    iteration = run_load_checkpoint(src(), fresh, fresh_opt)
    assert_equal(int(iteration), 3, rule="3.checkpoint: load_checkpoint returns the saved iteration")
    for (name, p), q in zip(model.named_parameters(), fresh.parameters()):
        assert_close(
            q.detach(),
            p.detach(),
            EXACT,
            rule=f"3.checkpoint: parameter {name} restored bit-exactly",
        )
    loaded = fresh_opt.state_dict()
    problem = _same_structure(loaded, opt.state_dict(), "optimizer.state_dict()")
    # exact: the loaded optimizer holds no per-parameter state at all
    empty = not loaded.get("state") if isinstance(loaded, dict) else False
    assert problem is None, f"3.checkpoint: the loaded optimizer's state differs from the saved one: {problem}" + (
        "; likely cause: the loaded optimizer has no state: optimizer.state_dict() not saved or not loaded"
        if empty
        else ""
    )


@spec("3.checkpoint")
@pytest.mark.parametrize("target", ["str-path", "bytesio"])
def test_checkpoint_resume_is_exact(run_save_checkpoint, run_load_checkpoint, adamw_cls, tmp_path, target):
    """Train k steps, save, load into a fresh model and optimizer, train n more:
    bit-exactly the parameters of k+n uninterrupted steps on the same batches."""
    k, n = 3, 3
    resumed, straight, bugs = _resume(run_save_checkpoint, run_load_checkpoint, adamw_cls, tmp_path, target, k, n)
    second = tmp_path / "second"
    second.mkdir()
    assert_close(
        resumed,
        straight,
        EXACT,
        rule=f"3.checkpoint: {k} steps + save/load + {n} steps must equal {k + n} uninterrupted steps",
        hints=bugs,
        # the second input: saved after 2 steps, 4 more after loading
        again=lambda: _resume(run_save_checkpoint, run_load_checkpoint, adamw_cls, second, target, 2, 4)[::2],
        context=f"AdamW {adamw_cls.__module__}.{adamw_cls.__qualname__} {HYPER}; checkpoint via {target}",
    )


def _resume(run_save_checkpoint, run_load_checkpoint, adamw_cls, tmp_path, target, k: int, n: int):
    """The parameters after k steps, save, load into a fresh model and AdamW, n
    more steps; those of k + n uninterrupted steps; the known bugs replayed."""
    batches = _batches(k + n)
    straight = _Tiny(0)
    _train(straight, adamw_cls(straight.parameters(), **HYPER), batches)

    first = _Tiny(0)
    first_opt = adamw_cls(first.parameters(), **HYPER)
    _train(first, first_opt, batches[:k])
    out, src = _targets(tmp_path)[target]
    run_save_checkpoint(first, first_opt, k, out)
    midway = copy.deepcopy(first)
    resumed = _Tiny(1)
    resumed_opt = adamw_cls(resumed.parameters(), **HYPER)
    iteration = run_load_checkpoint(src(), resumed, resumed_opt)
    assert_equal(int(iteration), k, rule="3.checkpoint: load_checkpoint returns the saved iteration")
    _train(resumed, resumed_opt, batches[k:])

    def without_optimizer_state():
        _train(midway, adamw_cls(midway.parameters(), **HYPER), batches[k:])
        return _params(midway)

    def with_torch_adamw():
        # The failure is the AdamW's where it disappears with torch's AdamW through
        # the same save and load: then the "replay" is the output itself, else none.
        if adamw_cls is torch.optim.AdamW:
            raise ValueError("already torch's AdamW: nothing to swap")
        swap = tmp_path / "torch-adamw"
        swap.mkdir(exist_ok=True)
        resumed_t, straight_t, _ = _resume(
            run_save_checkpoint, run_load_checkpoint, torch.optim.AdamW, swap, target, k, n
        )
        if describe_mismatch(resumed_t, straight_t, EXACT) is not None:
            raise ValueError("the resume fails with torch's AdamW too: not the optimizer's doing")
        return _params(resumed)

    bugs = [
        ("optimizer state not saved or not restored (resumed with a fresh AdamW)", without_optimizer_state),
        (hints.explained_by("3.adamw"), with_torch_adamw),
    ]
    return _params(resumed), _params(straight), bugs
