"""SPEC §2 single ops: Linear, Embedding, RMSNorm, SiLU, SwiGLU, softmax.

Oracles are torch built-ins run in float64 on CPU (conformance/cs336/oracles/nn.py);
the implementation runs in float32 on each ``device``. Tolerances are derived
(conformance/tolerances.py).

MUST tests use the course's contract only (SPEC §2 "Shapes"): ``(batch, seq,
d)`` inputs for Linear, SwiGLU and RMSNorm, ``(batch, seq)`` ids for the
embedding, any shape for softmax, float32 everywhere except RMSNorm's
bfloat16 rule. Other numbers of leading dims and bfloat16 elsewhere are
STRICT tests (reported, never scored).
"""

import pytest
import torch
from hypothesis import example, given, note

from lmspec.conformance import hints, near
from lmspec.conformance import tolerances as tol
from lmspec.conformance.asserts import assert_close, assert_dtype, assert_shape, describe_mismatch
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.oracles.nn_bugs import KNOWN_BUGS
from lmspec.conformance.cs336.strategies import nn as sn

TOL_SILU = {torch.float32: tol.SILU_F32, torch.bfloat16: tol.SILU_BF16}
strict = pytest.mark.strict

# Pinned traps. A square weight: a transposed weight runs, and the hint can
# name it instead of failing on a shape error.
_g = sn.generator(0)
SQUARE_LINEAR = sn.LinearCase(sn.randn(_g, 1, 2, 3), sn.weight(_g, 3, 3))
# |x| ~ 1e-3: mean(x²) is comparable to eps, so eps placement shows.
RMSNORM_SMALL_INPUT = sn.RMSNormCase(1e-3 * sn.randn(_g, 1, 2, 6), 1.0 + sn.randn(_g, 6, std=0.5), 1e-5)
# vocab 5: off-by-one lookups in either direction are told apart.
EMBEDDING_FIVE = sn.EmbeddingCase(sn.randn(_g, 5, 3), torch.tensor([[0, 4, 2, 1]]))

# Second inputs: a likely cause is named only when its replay (oracles/nn_bugs.py)
# reproduces the output on the failing input and on one of these (conformance/hints.py).
# Contract shapes, typical values, chosen so that every known bug of the item gives
# another output: square weights (a transposed weight runs), vocab > 2 (id+1 ≠ id-1),
# |x| ~ 1e-3 or eps 0.1 (eps placement), g ≠ 1, batch and seq > 1 (the RMS axis),
# a middle softmax dim of a 3-D input (the wrong dims differ from it and each other).
_s = sn.generator(1)
SECOND_LINEAR = (
    sn.LinearCase(sn.randn(_s, 2, 3, 4), sn.weight(_s, 4, 4)),
    sn.LinearCase(sn.randn(_s, 2, 2, 5), sn.weight(_s, 5, 5)),
)
SECOND_LINEAR_INTEGER = tuple(
    sn.LinearCase(
        torch.randint(-8, 9, (2, 3, d), generator=_s).float(), torch.randint(-8, 9, (d, d), generator=_s).float()
    )
    for d in (4, 5)
)
SECOND_EMBEDDING = (
    sn.EmbeddingCase(sn.randn(_s, 7, 4), torch.tensor([[3, 0, 6], [2, 5, 1]])),
    sn.EmbeddingCase(sn.randn(_s, 6, 3), torch.tensor([[1, 4], [5, 0]])),
)
SECOND_RMSNORM = (
    sn.RMSNormCase(1e-3 * sn.randn(_s, 2, 3, 6), 1.0 + sn.randn(_s, 6, std=0.5), 1e-5),
    sn.RMSNormCase(sn.randn(_s, 3, 2, 8), 1.0 + sn.randn(_s, 8, std=0.5), 0.1),
)
SECOND_SILU = (sn.randn(_s, 3, 8), sn.randn(_s, 2, 3, 5))
SECOND_SWIGLU = tuple(
    sn.SwiGLUCase(sn.randn(_s, 2, 3, d), sn.weight(_s, f, d), sn.weight(_s, d, f), sn.weight(_s, f, d))
    for d, f in ((8, 16), (6, 10))
)
SECOND_SOFTMAX = (sn.SoftmaxCase(sn.randn(_s, 3, 4, 5), 1), sn.SoftmaxCase(sn.randn(_s, 2, 5, 3), -2))


def _shape(t: torch.Tensor) -> str:
    return "x" + str(tuple(t.shape))


# --- Linear ---------------------------------------------------------------------
def _linear_observed(run_linear, device, case):
    x, w = case
    d_out, d_in = w.shape
    return run_linear(d_in, d_out, w.to(device), x.to(device)), KNOWN_BUGS.thunks("2.linear", x, w)


def _check_linear(run_linear, device, case, tolerance, rule, seconds=SECOND_LINEAR):
    __tracebackhide__ = True
    x, w = case
    out, bugs = _linear_observed(run_linear, device, case)
    assert_shape(out, (*x.shape[:-1], w.shape[0]), rule="Linear output is (..., d_out)")
    assert_close(
        out,
        oracle.linear(x, w),
        tolerance,
        rule=rule,
        hints=bugs,
        again=lambda: _linear_observed(run_linear, device, hints.other(case, *seconds)),
        context=f"{_shape(x)}, W{tuple(w.shape)}",
    )


@pytest.mark.spec("2.linear")
@given(case=sn.linear_cases(lead_dims=sn.BATCH_SEQ))
@example(case=SQUARE_LINEAR)
def test_linear_matches_float64(run_linear, device, case):
    """Linear is y = x Wᵀ with W of shape (d_out, d_in), on (batch, seq, d_in) inputs."""
    _check_linear(run_linear, device, case, tol.LINEAR_F32, "Linear y = x Wᵀ (float32 vs float64)")


@pytest.mark.spec("2.linear")
@given(case=sn.linear_cases(lead_dims=sn.BATCH_SEQ, integer=True))
def test_linear_exact_on_integer_values(run_linear, device, case):
    """On small integer values x Wᵀ is exact in float32 whatever the summation
    order, so the output must equal the float64 product bit for bit."""
    _check_linear(
        run_linear, device, case, tol.EXACT, "Linear y = x Wᵀ, exact on integer values", SECOND_LINEAR_INTEGER
    )


@pytest.mark.spec("2.linear")
@strict
@given(case=sn.linear_cases(lead_dims=sn.ANY_LEAD))
def test_linear_any_leading_dims(run_linear, device, case):
    """STRICT: Linear works for any number of leading dims (a 1-D vector, 2-D,
    4-D inputs), beyond the contract's (batch, seq, d_in)."""
    _check_linear(run_linear, device, case, tol.LINEAR_F32, "Linear y = x Wᵀ on any leading dims (float32 vs float64)")


# --- Embedding ----------------------------------------------------------------
def _embedding_observed(run_embedding, device, case):
    w, ids = case
    vocab, d_model = w.shape
    return run_embedding(vocab, d_model, w.to(device), ids.to(device)), KNOWN_BUGS.thunks("2.embedding", w, ids)


def _check_embedding(run_embedding, device, case):
    __tracebackhide__ = True
    w, ids = case
    out, bugs = _embedding_observed(run_embedding, device, case)
    assert_shape(out, (*ids.shape, w.shape[1]), rule="Embedding output is (..., d_model)")
    assert_close(
        out,
        oracle.embedding(w, ids),
        tol.EXACT,
        rule="Embedding is a row lookup W[id]",
        hints=bugs,
        again=lambda: _embedding_observed(run_embedding, device, hints.other(case, *SECOND_EMBEDDING)),
        context=f"ids {tuple(ids.shape)}, W{tuple(w.shape)}",
    )


@pytest.mark.spec("2.embedding")
@given(case=sn.embedding_cases(lead_dims=sn.BATCH))
@example(case=EMBEDDING_FIVE)
def test_embedding_is_row_lookup(run_embedding, device, case):
    """Embedding returns row W[id] for every id of a (batch, seq) tensor, bit for bit."""
    _check_embedding(run_embedding, device, case)


@pytest.mark.spec("2.embedding")
@strict
@given(case=sn.embedding_cases(lead_dims=sn.ANY_LEAD))
def test_embedding_any_id_shape(run_embedding, device, case):
    """STRICT: the lookup works for ids of any shape ((seq,), (a, b, seq)...)."""
    _check_embedding(run_embedding, device, case)


# --- RMSNorm ------------------------------------------------------------------
def _rmsnorm_observed(run_rmsnorm, device, case, dtype=torch.float32):
    """The implementation's output on ``case`` with ``x`` in ``dtype``, and the replays there."""
    x, g, eps = case
    x = x.to(dtype)
    return run_rmsnorm(g.shape[0], eps, g.to(device), x.to(device)), KNOWN_BUGS.thunks("2.rmsnorm", x, g, eps)


def _check_rmsnorm(run_rmsnorm, device, case):
    __tracebackhide__ = True
    x, g, eps = case
    out, bugs = _rmsnorm_observed(run_rmsnorm, device, case)
    assert_dtype(out, torch.float32, rule="RMSNorm returns the input dtype")
    assert_close(
        out,
        oracle.rmsnorm(x, g, eps),
        tol.RMSNORM_F32,
        rule="RMSNorm y = x / sqrt(mean(x²) + eps) · g",
        hints=bugs,
        again=lambda: _rmsnorm_observed(run_rmsnorm, device, hints.other(case, *SECOND_RMSNORM)),
        context=f"{_shape(x)}, eps={eps}, |x| scale {x.abs().max().item():.3g}",
    )


@pytest.mark.spec("2.rmsnorm")
@given(case=sn.rmsnorm_cases(lead_dims=sn.BATCH_SEQ))
@example(case=RMSNORM_SMALL_INPUT)
def test_rmsnorm_matches_float64(run_rmsnorm, device, case):
    """y = x / sqrt(mean(x²) + eps) · g over the last dim, eps inside the root,
    on (batch, seq, d_model) inputs."""
    _check_rmsnorm(run_rmsnorm, device, case)


@pytest.mark.spec("2.rmsnorm")
@strict
@given(case=sn.rmsnorm_cases(lead_dims=sn.ANY_LEAD))
def test_rmsnorm_any_leading_dims(run_rmsnorm, device, case):
    """STRICT: RMSNorm normalises the last dim of inputs with any number of
    leading dims ((d_model,), (seq, d_model), 4-D...)."""
    _check_rmsnorm(run_rmsnorm, device, case)


def _left_in_float32(out, case) -> list[str]:
    """The output-dtype switch, where ``out`` (of a bfloat16 ``case``) is float32
    and holds the float32 computation's values."""
    x, g, eps = case
    if getattr(out, "dtype", None) != torch.float32:
        return []
    exact = oracle.rmsnorm(x.to(torch.bfloat16), g, eps)
    if describe_mismatch(out, exact, tol.RMSNORM_F32) is not None:
        return []
    return ["computed in float32 and returned in float32: cast the result back to the input dtype (.to(in_dtype))"]


@pytest.mark.spec("2.rmsnorm")
@given(case=sn.rmsnorm_cases(lead_dims=sn.BATCH_SEQ))
def test_rmsnorm_bfloat16_computed_in_float32(run_rmsnorm, device, case):
    """bfloat16 input (the handout: upcast to float32, return ``result.to(in_dtype)``):
    RMSNorm computes in float32 and returns bfloat16, so the output is within
    one bfloat16 ulp of the exact result rounded to bfloat16 (gain in
    float32, the default parameter dtype)."""
    x, g, eps = case
    xb = x.to(torch.bfloat16)
    out, bugs = _rmsnorm_observed(run_rmsnorm, device, case, torch.bfloat16)
    second = hints.other(case, *SECOND_RMSNORM)
    hints.failing_with_causes(
        lambda: assert_dtype(
            out,
            torch.bfloat16,
            rule="RMSNorm returns the input dtype (bfloat16 in, bfloat16 out: cast the float32 result back to it)",
        ),
        lambda: hints.confirmed(
            _left_in_float32(out, case),
            lambda: _left_in_float32(_rmsnorm_observed(run_rmsnorm, device, second, torch.bfloat16)[0], second),
        ),
    )
    assert_close(
        out,
        oracle.rmsnorm(xb, g, eps).to(torch.bfloat16),
        tol.RMSNORM_BF16,
        rule="RMSNorm on bfloat16 is computed in float32 (≤ 1 bfloat16 ulp from the exact result)",
        hints=bugs,
        again=lambda: _rmsnorm_observed(run_rmsnorm, device, second, torch.bfloat16),
        context=f"{_shape(x)}, eps={eps}",
    )


# --- SiLU -----------------------------------------------------------------------
def _silu_observed(run_silu, device, x):
    return run_silu(x.to(device)), KNOWN_BUGS.thunks("2.silu", x)


def _check_silu(run_silu, device, x):
    __tracebackhide__ = True
    out, bugs = _silu_observed(run_silu, device, x)
    second = hints.other(x, *(s.to(x.dtype) for s in SECOND_SILU))
    assert_shape(out, x.shape, rule="SiLU keeps the shape")
    assert_close(
        out,
        oracle.silu(x),
        TOL_SILU[x.dtype],
        rule=f"SiLU x·sigmoid(x) ({x.dtype} vs float64)",
        hints=bugs,
        again=lambda: _silu_observed(run_silu, device, second),
        context=_shape(x),
    )


@pytest.mark.spec("2.silu")
@given(x=sn.activations(lead_dims=sn.MATRIX_OR_BATCH_SEQ))
def test_silu_matches_float64(run_silu, device, x):
    """SiLU(x) = x · sigmoid(x), elementwise, on 2-D (the official test's) and
    (batch, seq, d_ff) float32 inputs."""
    _check_silu(run_silu, device, x)


@pytest.mark.spec("2.silu")
@strict
@given(x=sn.activations(lead_dims=sn.ANY_LEAD))
def test_silu_any_shape_and_bfloat16(run_silu, device, float_dtype, x):
    """STRICT: SiLU works on any shape (1-D, 4-D) and on bfloat16 inputs."""
    _check_silu(run_silu, device, x.to(float_dtype))


# --- SwiGLU ---------------------------------------------------------------------
def _swiglu_observed(run_swiglu, device, case):
    x, w1, w2, w3 = case
    d_ff, d_model = w1.shape
    out = run_swiglu(d_model, d_ff, w1.to(device), w2.to(device), w3.to(device), x.to(device))
    return out, KNOWN_BUGS.thunks("2.swiglu", *case)


def _check_swiglu(run_swiglu, device, case):
    __tracebackhide__ = True
    out, bugs = _swiglu_observed(run_swiglu, device, case)
    assert_shape(out, case.x.shape, rule="SwiGLU output is (..., d_model)")
    assert_close(
        out,
        oracle.swiglu(*case),
        tol.SWIGLU_F32,
        rule="SwiGLU W2 (SiLU(W1 x) ⊙ W3 x) (float32 vs float64)",
        hints=bugs,
        again=lambda: _swiglu_observed(run_swiglu, device, hints.other(case, *SECOND_SWIGLU)),
        context=f"{_shape(case.x)}, d_ff={case.w1.shape[0]}",
    )


@pytest.mark.spec("2.swiglu")
@given(case=sn.swiglu_cases(lead_dims=sn.BATCH_SEQ))
def test_swiglu_matches_float64(run_swiglu, device, case):
    """SwiGLU FFN = W2 (SiLU(W1 x) ⊙ W3 x), W1, W3: (d_ff, d_model), W2: (d_model, d_ff),
    on (batch, seq, d_model) inputs."""
    _check_swiglu(run_swiglu, device, case)


@pytest.mark.spec("2.swiglu")
@strict
@given(case=sn.swiglu_cases(lead_dims=sn.ANY_LEAD))
def test_swiglu_any_leading_dims(run_swiglu, device, case):
    """STRICT: SwiGLU works for any number of leading dims."""
    _check_swiglu(run_swiglu, device, case)


# --- softmax ----------------------------------------------------------------------
def _softmax_observed(run_softmax, device, x, dim):
    return run_softmax(x.to(device), dim), KNOWN_BUGS.thunks("2.softmax", x, dim)


def _softmax_tol(x: torch.Tensor) -> tol.Tolerance:
    """The dtype's bound; in float32 widened for large inputs, since correct
    formulas that round x − logsumexp(x) (exp(x − lse)) carry an error
    proportional to max|x| (conformance/tolerances.py)."""
    if x.dtype != torch.float32:
        return tol.SOFTMAX_BF16
    magnitude = float(x.detach().abs().max()) if x.numel() else 0.0
    bound = max(tol.SOFTMAX_F32.atol, tol.SOFTMAX_F32_PER_UNIT.atol * magnitude)
    return tol.Tolerance(bound, bound, f"max({tol.SOFTMAX_F32.atol:g}, {tol.SOFTMAX_F32_PER_UNIT.atol:g} × max|x|)")


def _check_softmax(run_softmax, device, x, dim, rule, second):
    """``second``: the (x, dim) of the test's second input, in ``x``'s dtype."""
    __tracebackhide__ = True
    out, bugs = _softmax_observed(run_softmax, device, x, dim)
    assert_shape(out, x.shape, rule="softmax keeps the shape")
    assert_close(
        out,
        oracle.softmax(x, dim),
        _softmax_tol(x),
        rule=rule,
        hints=bugs,
        again=lambda: _softmax_observed(run_softmax, device, *second),
        near=(near.sums_to_one(dim), near.scale),
        context=f"{_shape(x)}, dim={dim}",
    )


def _second_softmax(case, transform=lambda x: x, dtype=torch.float32):
    x, dim = hints.other(case, *SECOND_SOFTMAX)
    return transform(x).to(dtype), dim


@pytest.mark.spec("2.softmax")
@given(case=sn.softmax_cases())
def test_softmax_matches_float64(run_softmax, device, case):
    """softmax(x, dim) = exp(x − max) / Σ exp(x − max) along any dim, any rank (float32)."""
    x, dim = case
    _check_softmax(run_softmax, device, x, dim, f"softmax along dim={dim} (float32 vs float64)", _second_softmax(case))


@pytest.mark.spec("2.softmax")
@strict
@given(case=sn.softmax_cases())
def test_softmax_bfloat16_matches_float64(run_softmax, device, case):
    """STRICT: softmax on bfloat16 inputs (the handout uses float32) is within
    bfloat16 accuracy of the float64 softmax of the same values."""
    x, dim = case
    xb = x.to(torch.bfloat16)
    rule = f"softmax along dim={dim} (bfloat16 vs float64)"
    _check_softmax(run_softmax, device, xb, dim, rule, _second_softmax(case, dtype=torch.bfloat16))


HUGE = {"x+1000": lambda x: x + 1000, "x-1000": lambda x: x - 1000, "x*1e4": lambda x: x * 1e4}


def _nonfinite_where_replays_are(out, bugs) -> list[str]:
    """The causes whose replay has inf/NaN exactly where ``out`` has, of the same
    kind (NaN, +inf, −inf: 0/0 is not x/0)."""
    got = torch.as_tensor(out).detach().cpu()

    def kinds(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return t.isnan(), t.isposinf(), t.isneginf()

    found = []
    for cause, replay in bugs:
        try:
            again = replay()
        except Exception:  # a replay that cannot be computed names nothing
            continue
        if again.shape == got.shape and all(torch.equal(a, b) for a, b in zip(kinds(again), kinds(got))):
            found.append(cause)
    return found


def _check_softmax_huge(run_softmax, device, transform, case, dtype):
    __tracebackhide__ = True
    x, dim = case
    big = HUGE[transform](x).to(dtype)
    second = _second_softmax(case, HUGE[transform], dtype)
    out, bugs = _softmax_observed(run_softmax, device, big, dim)
    if not bool(torch.as_tensor(out).detach().cpu().isfinite().all()):
        causes = hints.confirmed(
            _nonfinite_where_replays_are(out, bugs),
            lambda: _nonfinite_where_replays_are(*_softmax_observed(run_softmax, device, *second)),
        )
        raise AssertionError(
            f"softmax({transform}) must stay finite but has inf/NaN (input {_shape(x)}, dim={dim})"
            + hints.likely_causes(causes)
        )
    rule = f"softmax({transform}) equals the float64 softmax ({dtype})"
    _check_softmax(run_softmax, device, big, dim, rule, second)


@pytest.mark.spec("2.softmax")
@pytest.mark.parametrize("transform", list(HUGE), ids=[f"softmax({k}) is finite" for k in HUGE])
@given(case=sn.softmax_cases())
@example(case=sn.SoftmaxCase(torch.tensor([0.0, 1.0, 2.0]), 0))
def test_softmax_finite_for_huge_inputs(run_softmax, device, transform, case):
    """softmax subtracts the max first: it stays finite and accurate for
    x + 1000, x − 1000 and x · 1e4 (float32)."""
    _check_softmax_huge(run_softmax, device, transform, case, torch.float32)


@pytest.mark.spec("2.softmax")
@strict
@pytest.mark.parametrize("transform", list(HUGE), ids=[f"bfloat16 softmax({k}) is finite" for k in HUGE])
@given(case=sn.softmax_cases())
def test_softmax_bfloat16_finite_for_huge_inputs(run_softmax, device, transform, case):
    """STRICT: the same on bfloat16 inputs."""
    _check_softmax_huge(run_softmax, device, transform, case, torch.bfloat16)


@pytest.mark.spec("2.softmax")
@given(case=sn.softmax_cases(grid=True), seed=sn.seeds)
def test_softmax_invariant_to_shift_along_dim(run_softmax, device, case, seed):
    """Adding a constant along dim (one per slice, up to ±1000) changes nothing."""
    x, dim = case
    g = torch.Generator().manual_seed(seed)
    shift_shape = list(x.shape)
    shift_shape[dim] = 1
    # integers: x is on a 1/64 grid, so x + shift is exact in float32
    shift = torch.randint(-1000, 1001, shift_shape, generator=g).float()
    note(f"shift {shift.flatten()[:8].tolist()}")
    base = run_softmax(x.to(device), dim)
    shifted = run_softmax((x + shift).to(device), dim)
    assert_close(
        shifted,
        base,
        _softmax_tol(x + shift),
        rule="softmax(x + c) = softmax(x) for c constant along dim",
        context=f"{_shape(x)}, dim={dim}",
    )


@pytest.mark.spec("2.softmax")
@given(case=sn.softmax_cases())
def test_softmax_sums_to_one_along_dim(run_softmax, device, case):
    """Every slice along dim is a probability vector: non-negative, sum 1."""
    x, dim = case
    out, sums, bugs = _sums_observed(run_softmax, device, x, dim)
    assert bool((out >= 0).all()), f"softmax has negative entries (input {_shape(x)}, dim={dim})"
    assert_close(
        sums,
        torch.ones_like(sums),
        tol.SOFTMAX_F32,
        rule=f"softmax sums to 1 along dim={dim}",
        hints=bugs,
        again=lambda: _sums_observed(run_softmax, device, *_second_softmax(case))[1:],
        context=f"{_shape(x)}, dim={dim}",
    )


def _sums_observed(run_softmax, device, x, dim):
    """The implementation's softmax (float64), its sums along ``dim``, and the
    replays' sums."""
    out, bugs = _softmax_observed(run_softmax, device, x, dim)
    out = torch.as_tensor(out).detach().cpu().double()
    return out, out.sum(dim), [(cause, lambda f=f: f().sum(dim)) for cause, f in bugs]
