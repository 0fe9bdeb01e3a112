"""Measure the float32 (and bfloat16) error of *correct* SPEC §2
implementations against the float64 oracles, to derive the bounds in
conformance/tolerances.py.

Implementations measured: the reference adapter, the two variants in
tests/variants/ (einsum everywhere with other op orders; fused QKV with
complex RoPE) and "builtins", the torch built-ins a student might mirror
(F.linear, F.rms_norm, torch.softmax, F.scaled_dot_product_attention...).
Inputs are drawn from the suite's own strategies (conformance/cs336/strategies/nn.py),
derandomised, so they include the examples the ci profile runs.

For every check the error is ``|a − e| / (1 + |e|)``: a bound ``atol = rtol
= b`` accepts exactly the outputs whose error is ≤ b. The suggested bound is
the measured maximum times ``--factor`` (default 4), rounded up to 1, 2 or 5
× 10^k. The RMSNorm bfloat16 check is reported in bfloat16 ulps instead
(its bound is one ulp).

    python -m tools.measure_tolerances                 # all checks, 200 examples
    python -m tools.measure_tolerances --examples 50 --only ROPE_F32
"""

import argparse
import importlib
import importlib.util
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.strategies import nn as sn

REPO = Path(__file__).resolve().parent.parent
VARIANTS = ("tests/variants/einsum_matmul.py", "tests/variants/fused_qkv.py")

Pair = tuple[torch.Tensor, torch.Tensor]  # (implementation output, expected)


def builtins() -> SimpleNamespace:
    """The torch built-ins, as one more correct implementation."""

    def mha(d_model, num_heads, q_w, k_w, v_w, o_w, x, rope=None):
        seq = x.shape[-2]
        q, k, v = (F.linear(x, w).unflatten(-1, (num_heads, -1)).transpose(-2, -3) for w in (q_w, k_w, v_w))
        if rope is not None:
            q, k = rope(q), rope(k)
        causal = torch.ones(seq, seq, dtype=torch.bool).tril()
        return F.linear(
            F.scaled_dot_product_attention(q, k, v, attn_mask=causal).transpose(-2, -3).flatten(-2),
            o_w,
        )

    def rope(d_k, theta, max_seq_len, x, positions):
        # float32 rotation of strided pairs, cos/sin of float64 angles
        angles = oracle.rope_angles(torch.arange(max_seq_len), d_k, theta).float()[positions]
        cos, sin = angles.cos(), angles.sin()
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)

    def mha_rope(d_model, num_heads, max_seq_len, theta, q_w, k_w, v_w, o_w, x, token_positions=None):
        positions = torch.arange(x.shape[-2]) if token_positions is None else token_positions
        d_k = d_model // num_heads
        return mha(
            d_model,
            num_heads,
            q_w,
            k_w,
            v_w,
            o_w,
            x,
            lambda t: rope(d_k, theta, max_seq_len, t, positions[..., None, :]),
        )

    return SimpleNamespace(
        run_linear=lambda d_in, d_out, w, x: F.linear(x, w),
        run_rmsnorm=lambda d, eps, w, x: F.rms_norm(x.float(), (d,), w.float(), eps).to(x.dtype),
        run_silu=F.silu,
        run_swiglu=lambda d, f, w1, w2, w3, x: F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2),
        run_silu_ffn=lambda d, f, w1, w2, x: F.linear(F.silu(F.linear(x, w1)), w2),
        run_softmax=lambda x, dim: torch.softmax(x, dim),
        run_rope=rope,
        run_scaled_dot_product_attention=lambda q, k, v, mask=None: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask
        ),
        run_multihead_self_attention=mha,
        run_multihead_self_attention_with_rope=mha_rope,
    )


def _module_from_file(path: Path) -> object:
    """One of lmspec's own variant files, imported here (trusted code: a
    measurement tool, not a grading)."""
    spec = importlib.util.spec_from_file_location(f"_measured_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def implementations(names: list[str]) -> dict[str, object]:
    impls: dict[str, object] = {}
    for name in names:
        if name == "builtins":
            impls[name] = builtins()
        elif name == "reference":
            impls[name] = importlib.import_module("lmspec.reference.adapter")
        else:
            impls[Path(name).stem] = _module_from_file(REPO / name)
    return impls


def sample(strategy: st.SearchStrategy, n: int) -> list:
    """n derandomised draws from ``strategy`` (the ci profile's sequence first)."""
    out: list = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value):
        out.append(value)

    collect()
    return out


# --- checks: each yields (implementation output, expected) pairs -------------------
def linear_pairs(impl, n: int) -> Iterator[Pair]:
    for x, w in sample(sn.linear_cases(), n):
        yield impl.run_linear(w.shape[1], w.shape[0], w, x), oracle.linear(x, w)


def rmsnorm_pairs(impl, n: int) -> Iterator[Pair]:
    for x, g, eps in sample(sn.rmsnorm_cases(), n):
        yield impl.run_rmsnorm(g.shape[0], eps, g, x), oracle.rmsnorm(x, g, eps)


def rmsnorm_bf16_pairs(impl, n: int) -> Iterator[Pair]:
    for x, g, eps in sample(sn.rmsnorm_cases(), n):
        xb = x.bfloat16()
        yield impl.run_rmsnorm(g.shape[0], eps, g, xb), oracle.rmsnorm(xb, g, eps).bfloat16()


def silu_pairs(dtype):
    def pairs(impl, n: int) -> Iterator[Pair]:
        for x in sample(sn.activations(), n):
            x = x.to(dtype)
            yield impl.run_silu(x), oracle.silu(x)

    return pairs


def swiglu_pairs(impl, n: int) -> Iterator[Pair]:
    for x, w1, w2, w3 in sample(sn.swiglu_cases(), n):
        d_ff, d_model = w1.shape
        yield impl.run_swiglu(d_model, d_ff, w1, w2, w3, x), oracle.swiglu(x, w1, w2, w3)
        yield impl.run_silu_ffn(d_model, d_ff, w1, w2, x), oracle.silu_ffn(x, w1, w2)


def softmax_pairs(dtype):
    def pairs(impl, n: int) -> Iterator[Pair]:
        for x, dim in sample(sn.softmax_cases(), n):
            for big in (x, x + 1000, x - 1000, x * 1e4):
                big = big.to(dtype)
                out = impl.run_softmax(big, dim)
                yield out, oracle.softmax(big, dim)
                if dtype == torch.float32:
                    yield out.double().sum(dim), torch.ones(()).expand(out.sum(dim).shape)
        if dtype == torch.float32:
            for (x, dim), shift in zip(sample(sn.softmax_cases(grid=True), n), sample(sn.seeds, n)):
                shape = list(x.shape)
                shape[dim] = 1
                c = torch.randint(-1000, 1001, shape, generator=torch.Generator().manual_seed(shift)).float()
                yield impl.run_softmax(x + c, dim), impl.run_softmax(x, dim)

    return pairs


def rope_pairs(impl, n: int) -> Iterator[Pair]:
    for case in sample(sn.rope_cases(), n):
        x, pos, theta, msl = case
        out = impl.run_rope(x.shape[-1], theta, msl, x, pos)
        yield out, oracle.rope(x, pos, theta)
        yield out.double().norm(dim=-1), x.double().norm(dim=-1)
        yield impl.run_rope(x.shape[-1], theta, msl, x, torch.zeros_like(pos)), x


def rope_dot_pairs(impl, n: int) -> Iterator[Pair]:
    draws = st.tuples(
        st.integers(1, sn.MAX_ROPE_DK // 2),
        st.sampled_from(sn.THETAS),
        st.lists(st.integers(0, sn.MAX_POSITION // 2 - 1), min_size=3, max_size=3),
        sn.seeds,
    )
    for d_half, theta, (m, p, s), seed in sample(draws, n):
        d_k = 2 * d_half
        q, k = torch.randn(2, d_k, generator=torch.Generator().manual_seed(seed))
        x = torch.stack([q / q.norm(), k / k.norm()] * 2)[:, None, :]
        out = impl.run_rope(d_k, theta, sn.MAX_POSITION, x, torch.tensor([[m], [p], [m + s], [p + s]]))[:, 0].double()
        yield out[2] @ out[3], out[0] @ out[1]


def sdpa_pairs(dtype):
    def pairs(impl, n: int) -> Iterator[Pair]:
        for q, k, v, mask in sample(sn.sdpa_cases(), n):
            q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
            yield impl.run_scaled_dot_product_attention(q, k, v, mask), oracle.sdpa(q, k, v, mask)
            if dtype == torch.float32:
                yield impl.run_scaled_dot_product_attention(q, k, v), oracle.sdpa(q, k, v)
                const = torch.full_like(v, 0.75)
                yield (
                    impl.run_scaled_dot_product_attention(q, k, const, mask),
                    oracle.f64(const[..., :1, :]).expand(*q.shape[:-1], v.shape[-1]),
                )

    return pairs


def mha_pairs(impl, n: int) -> Iterator[Pair]:
    for c in sample(sn.mha_cases(), n):
        w = c.q_w, c.k_w, c.v_w, c.o_w
        d_model = c.x.shape[-1]
        yield (
            impl.run_multihead_self_attention(d_model, c.num_heads, *w, c.x),
            oracle.mha(c.x, *w, c.num_heads),
        )
        with_rope = impl.run_multihead_self_attention_with_rope(
            d_model, c.num_heads, c.max_seq_len + 30, c.theta, *w, c.x, token_positions=c.positions
        )
        yield with_rope, oracle.mha(c.x, *w, c.num_heads, theta=c.theta, positions=c.positions)
        shifted = impl.run_multihead_self_attention_with_rope(
            d_model,
            c.num_heads,
            c.max_seq_len + 30,
            c.theta,
            *w,
            c.x,
            token_positions=c.positions + 30,
        )
        yield shifted, with_rope.double()


ABLATIONS = [
    ("pre", True, "swiglu"),
    ("post", True, "swiglu"),
    ("none", True, "swiglu"),
    ("pre", False, "swiglu"),
    ("pre", True, "silu"),
    ("post", False, "silu"),
]


def block_pairs(impl, n: int) -> Iterator[Pair]:
    for norm, use_rope, ffn in ABLATIONS:
        for c in sample(sn.block_cases(norm=norm, ffn=ffn), max(1, n // len(ABLATIONS))):
            args = c.d_model, c.num_heads, c.d_ff, c.max_seq_len, c.theta, dict(c.weights), c.x
            out = impl.run_transformer_block_ablation(*args, norm=norm, use_rope=use_rope, ffn=ffn)
            expected = oracle.block(c.x, c.weights, c.num_heads, c.theta if use_rope else None, norm=norm, ffn=ffn)
            yield out, expected


def lm_pairs(impl, n: int) -> Iterator[Pair]:
    for norm, use_rope, ffn in ABLATIONS:
        for ids, weights, cfg in sample(
            sn.lm_cases(norm=norm, ffn=ffn, full_context=True), max(1, n // len(ABLATIONS))
        ):
            args = (*cfg[:6], cfg.rope_theta, dict(weights))
            out = impl.run_transformer_lm_ablation(*args, ids, norm=norm, use_rope=use_rope, ffn=ffn)
            yield out, oracle.lm(ids, weights, cfg, norm=norm, use_rope=use_rope, ffn=ffn)
            s = max(1, ids.shape[-1] // 2)
            prefix = impl.run_transformer_lm_ablation(*args, ids[:, :s], norm=norm, use_rope=use_rope, ffn=ffn)
            yield prefix, out[:, :s].double()


CHECKS: dict[str, tuple[Callable, str]] = {
    "LINEAR_F32": (linear_pairs, "mixed"),
    "RMSNORM_F32": (rmsnorm_pairs, "mixed"),
    "RMSNORM_BF16": (rmsnorm_bf16_pairs, "ulp"),
    "SILU_F32": (silu_pairs(torch.float32), "mixed"),
    "SILU_BF16": (silu_pairs(torch.bfloat16), "mixed"),
    "SWIGLU_F32": (swiglu_pairs, "mixed"),
    "SOFTMAX_F32": (softmax_pairs(torch.float32), "mixed"),
    "SOFTMAX_BF16": (softmax_pairs(torch.bfloat16), "mixed"),
    "ROPE_F32": (rope_pairs, "mixed"),
    "ROPE_DOT_F32": (rope_dot_pairs, "mixed"),
    "SDPA_F32": (sdpa_pairs(torch.float32), "mixed"),
    "SDPA_BF16": (sdpa_pairs(torch.bfloat16), "mixed"),
    "MHA_F32": (mha_pairs, "mixed"),
    "BLOCK_F32": (block_pairs, "mixed"),
    "LM_F32": (lm_pairs, "mixed"),
}


def errors(actual: torch.Tensor, expected: torch.Tensor, metric: str) -> tuple[float, float, float]:
    """(max mixed error or max ulps, max abs error, max rel error where |e| > 1e-3)."""
    a = torch.as_tensor(actual).detach().cpu().double()
    e = torch.as_tensor(expected).detach().cpu().double().expand_as(a)
    if a.numel() == 0:
        return 0.0, 0.0, 0.0
    diff = (a - e).abs()
    big = e.abs() > 1e-3
    rel = float((diff[big] / e.abs()[big]).max()) if bool(big.any()) else 0.0
    if metric == "ulp":
        # one bfloat16 ulp at e: 2^(floor(log2|e|) - 7)
        ulp = torch.exp2(torch.floor(torch.log2(e.abs().clamp_min(1e-30))) - 7)
        return float((diff / ulp).max()), float(diff.max()), rel
    return float((diff / (1 + e.abs())).max()), float(diff.max()), rel


def nice_ceiling(x: float) -> float:
    if x <= 0:
        return 0.0
    exp = math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * 10**exp >= x * (1 - 1e-12):
            return m * 10**exp
    return 10 ** (exp + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=200, help="examples per check and implementation")
    parser.add_argument("--factor", type=float, default=4.0, help="bound = factor × measured max, rounded up")
    parser.add_argument("--only", default="", help="comma-separated check names")
    parser.add_argument("--impls", default="reference,builtins," + ",".join(VARIANTS))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    impls = implementations([s for s in args.impls.split(",") if s])
    names = [c for c in CHECKS if not args.only or c in args.only.split(",")]
    print(f"torch {torch.__version__}, {args.examples} examples per check, factor {args.factor}")
    print(f"{'check':14s} {'impl':14s} {'max err':>10s} {'max abs':>10s} {'max rel':>10s}  pairs")
    for name in names:
        make, metric = CHECKS[name]
        worst = 0.0
        for impl_name, impl in impls.items():
            start, m_err, m_abs, m_rel, count = time.perf_counter(), 0.0, 0.0, 0.0, 0
            try:
                for actual, expected in make(impl, args.examples):
                    err, ab, rel = errors(actual, expected, metric)
                    m_err, m_abs, m_rel, count = (
                        max(m_err, err),
                        max(m_abs, ab),
                        max(m_rel, rel),
                        count + 1,
                    )
            except (AttributeError, NotImplementedError, TypeError) as exc:
                print(f"{name:14s} {impl_name:14s} skipped: {type(exc).__name__}: {str(exc)[:80]}")
                continue
            worst = max(worst, m_err)
            unit = " ulp" if metric == "ulp" else ""
            print(
                f"{name:14s} {impl_name:14s} {m_err:10.3g}{unit} {m_abs:10.3g} {m_rel:10.3g}  "
                f"{count} ({time.perf_counter() - start:.1f}s)"
            )
        if metric == "ulp":
            print(f"  -> {name}: max {worst:.3g} bfloat16 ulp (bound: 1 ulp)")
        else:
            bound = nice_ceiling(worst * args.factor)
            print(f"  -> {name}: max {worst:.3g}; suggested atol = rtol = {bound:g}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
