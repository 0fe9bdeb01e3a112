"""Named, derived tolerances: one per op and dtype.

Each bound is a few times the float32-vs-float64 error measured on *correct*
variants (einsum vs matmul, fused vs separate projections, other op orders);
the comment next to each records the measurement (tools/measure_tolerances.py;
docs/grading.md, "What the suite checks"). Failures print the tolerance they were held to.
"""

from typing import NamedTuple


class Tolerance(NamedTuple):
    atol: float
    rtol: float
    why: str = ""

    def __str__(self) -> str:
        return f"atol={self.atol:g}, rtol={self.rtol:g}"


# Exact: integer outputs, lookups, things with no rounding at all.
EXACT = Tolerance(0.0, 0.0, "no arithmetic: must be bit-exact")


# --- SPEC §3 training and §4 generation (test_loss_optim.py, test_adamw.py,
# test_data_checkpoint.py, test_generation.py). "measured": worst error of
# correct float32 variants (explicit max-subtraction, torch.logsumexp,
# F.cross_entropy; torch.softmax; float32 norm accumulators...) against the
# float64 oracle over 300 examples of the test's own strategy.
# Cross-entropy: logsumexp(o) − o[t] in float32 loses ulps of the largest
# logit, so atol is relative to max(1, max|logit|) (the tests multiply).
# Measured 3.6e-7 (×1000 logits: 1.6e-8); relative 1.6e-7.
CROSS_ENTROPY_F32 = Tolerance(2e-6, 1e-6, "atol × max(1, max|logit|)")
# exp(CE): relative error = CE's absolute error (the test adds the CE atol).
# Measured 1.2e-6 relative.
PERPLEXITY_F32 = Tolerance(0.0, 1e-5, "relative, plus the cross-entropy atol")
# AdamW trajectories of float32 parameters (the official test's dtype) vs
# the float64 oracle run from the same float32 values. The bound is
# atol × the run's largest lr (formulation) + rtol × max|θ₀| (float32 storage
# of θ), applied elementwise to every step. Measured on correct float32
# formulations (SPEC §3; tests/variants/train_adamw_f32_step_counter.py is
# one): a float32 tensor step counter with float32 bias corrections (α_t folded; or
# m̂/(sqrt(v̂) + ε); or bias corrections applied separately with ε/sqrt(bc2)),
# a Python-float step count, decay before and after, in-place and
# out-of-place updates, m, v from torch.zeros(p.shape), torch.optim.AdamW
# (foreach and single-tensor), the reference and tests/variants/
# adamw_decay_after.py, on 300 derandomised examples of both strategies
# (lr-only groups with a schedule; per-group betas/eps/weight_decay) plus
# 1500 random ones for the float32 counters. Float32 storage alone: error ≤
# 2.6e-7·max|θ| (Python-float count). With 1e-6·max|θ| allowed for storage,
# the float32 step counters need ≤ 3.7e-5·lr (their 1 − β^t in float32 is
# off by ~3e-8/(1 − β2) relative: ≤ 3e-5 per step at β2 = 0.999). Bounds:
# 5× / 8× those. The contract's β2 reaches 0.9999 (SPEC §3): the AdamW tests
# scale the atol by max(1, 1e-3/(1 − β2)) (measured at β2 = 0.9999, lr 0.1,
# 12 steps: 6.1e-5 against 2.5e-5: 2.5× the unscaled bound, 0.46× the scaled one).
# Known bugs move parameters by O(lr) per step; pinned examples use lr ≥ 1e-2
# so they stand out.
ADAMW_TRAJECTORY = Tolerance(2e-4, 2e-6, "atol × the run's largest lr + rtol × max|θ₀|, elementwise")
ADAMW_OFFICIAL = Tolerance(1e-4, 0.0, "the official CS336 test's atol")
# Schedule values compared as α/α_max: float64 formula exact to 1e-16, a
# float32 torch formula 6e-8.
SCHEDULE = Tolerance(1e-6, 0.0, "on α/α_max")
# Clipping: float64 gradients measured 4e-16 relative (6.8e-8 with a float32
# norm accumulator); the SPEC's +1e-6 changes them by 1e-6/norm relative.
CLIP_F64 = Tolerance(1e-12, 1e-6, "float64 gradients")
# float32 gradients: measured 9.8e-8 relative. STRICT: this tolerance tells
# the SPEC's +1e-6 on the norm from another epsilon or its placement.
CLIP_F32 = Tolerance(0.0, 1e-6, "float32 gradients")
# MUST: the official test's tolerance on the clipped gradients (numpy's
# assert_allclose, atol 1e-6), with float32 rounding (rtol 1e-6) on top for
# max_norm up to 10. Another epsilon placement moves a clipped gradient by at
# most max_norm·1e-6/norm < 1e-6 (the norm exceeds max_norm): admitted, and
# reported by the STRICT test. Bugs (per-parameter norms, no scaling, a copy
# scaled instead of the gradients) move them by a fraction of their size.
CLIP_OFFICIAL = Tolerance(1e-6, 1e-6, "the official test's atol 1e-6, float32 rtol")
# softmax(v/τ) in float32: v/τ rounds to ulps of max|v|/τ; atol × max(1,
# max|v|/τ). Measured 4.0e-8.
TEMPERATURE_F32 = Tolerance(4e-7, 0.0, "atol × max(1, max|logit|/τ)")
# Renormalised float32 probabilities: measured 9.2e-8 absolute.
TOP_P_F32 = Tolerance(1e-7, 1e-6, "renormalised float32 probabilities")
# Final-position logits of a float32 LM (vocab 24, d_model 16, 2 layers) vs
# the float64 oracle: measured 6e-6. Greedy tests use weights whose top-1/
# top-2 gap is ≥ 50× this bound at every step, so argmax is unambiguous.
GREEDY_LOGIT_F32 = Tolerance(1e-4, 0.0, "float32 LM logits vs float64")


# --- SPEC §2 Transformer LM (conformance/cs336/test_nn_ops.py, test_rope.py,
# test_attention.py, test_model.py). Derived by tools/measure_tolerances.py
# (torch 2.13 CPU; three runs: 200, 200 and 400 derandomised examples per
# check from conformance/cs336/strategies/nn.py): error = |a − e| / (1 + |e|) of
# correct implementations (reference adapter, torch built-ins,
# tests/variants/einsum_matmul.py, tests/variants/fused_qkv.py) against the
# float64 oracle, property checks included (sums, shifts, prefixes). Bound:
# 4-9× the largest measurement, rounded up to 1, 2 or 5 × 10^k; atol = rtol.
# The bugs the suite names move outputs by ≥ 1e-3 (most by O(1)).
# measured max 3.3e-7 (all implementations alike)
LINEAR_F32 = Tolerance(2e-6, 2e-6, "float32 x Wᵀ vs float64; measured max 3.3e-7")
# measured max 2.0e-7
RMSNORM_F32 = Tolerance(1e-6, 1e-6, "float32 RMSNorm vs float64; measured max 2.0e-7")
# bfloat16 in, computed in float32, returned in bfloat16: a correct result is
# the exact one rounded to bfloat16, or one ulp off when the float32 value
# sits at a rounding boundary (measured: 0 or 1 ulp). rtol 2^-7 admits
# exactly one ulp anywhere in a binade; bfloat16 intermediates (no upcast)
# round 4-5 times and exceed it on some elements.
RMSNORM_BF16 = Tolerance(0.0, 2**-7, "one bfloat16 ulp of the exact result; measured max 1 ulp")
# measured max 1.2e-7
SILU_F32 = Tolerance(5e-7, 5e-7, "float32 SiLU vs float64; measured max 1.2e-7")
# measured max 4.3e-3 (einsum: x / (1 + e^{-x}) in bfloat16)
SILU_BF16 = Tolerance(2e-2, 2e-2, "bfloat16 SiLU vs float64; measured max 4.3e-3")
# SwiGLU and the SiLU-FFN ablation: measured max 5.4e-7
SWIGLU_F32 = Tolerance(5e-6, 5e-6, "float32 FFN vs float64; measured max 5.4e-7")
# oracle, x ± 1000, x·1e4, sums to 1, shift invariance: measured max 1.3e-7
SOFTMAX_F32 = Tolerance(1e-6, 1e-6, "float32 softmax vs float64; measured max 1.3e-7")
# Large inputs: a correct float32 softmax written exp(x − lse), lse = m +
# log Σ exp(x − m) (or torch.logsumexp), rounds lse at the inputs' magnitude.
# Measured (300 ci-profile examples of softmax_cases, x, x ± 1000, x·1e4):
# error / max(1, max|x|) ≤ 3.7e-8 (1.5e-5 absolute at x + 1000; max-subtract
# then divide: ≤ 9e-8 absolute anywhere). Bound: max(SOFTMAX_F32, this × max|x|).
SOFTMAX_F32_PER_UNIT = Tolerance(2e-7, 2e-7, "× max|x|; exp(x − lse) measured 3.7e-8 per unit of max|x|")
# measured max 2.9e-3
SOFTMAX_BF16 = Tolerance(2e-2, 2e-2, "bfloat16 softmax vs float64; measured max 2.9e-3")
# positions up to 255: float32 cos/sin tables carry the angle's float32 error
# (≈ position × 6e-8 rad): measured max 2.1e-5 (einsum: float32 tables),
# 1.2e-7 with float64-built tables (reference, fused)
ROPE_F32 = Tolerance(1e-4, 1e-4, "float32 RoPE vs float64; measured max 2.1e-5")
# ⟨RoPE(q,m), RoPE(k,n)⟩ vs the same at m+s, n+s, unit q and k: measured max 1.0e-6
ROPE_DOT_F32 = Tolerance(5e-6, 5e-6, "RoPE inner products under a shift; measured max 1.0e-6")
# with/without mask, constant values: measured max 1.2e-6
SDPA_F32 = Tolerance(5e-6, 5e-6, "float32 attention vs float64; measured max 1.2e-6")
# bfloat16 scores and weights: measured max 1.9e-2
SDPA_BF16 = Tolerance(1e-1, 1e-1, "bfloat16 attention vs float64; measured max 1.9e-2")
# with/without RoPE, position shift: measured max 7.5e-7
MHA_F32 = Tolerance(5e-6, 5e-6, "float32 MHA vs float64 per-head loop; measured max 7.5e-7")
# pre-norm and every ablation: measured max 1.6e-6
BLOCK_F32 = Tolerance(1e-5, 1e-5, "float32 block vs float64; measured max 1.6e-6")
# logits, every ablation, prefix consistency: measured max 5.8e-6
LM_F32 = Tolerance(5e-5, 5e-5, "float32 LM logits vs float64; measured max 5.8e-6")


# --- the gpt2 profile's golden snapshots (snapshots/gpt2, conformance/gpt2/test_snapshots.py):
# the bounds its float64 tests hold the same ops to (conformance/gpt2/test_layers.py,
# test_attention.py, test_model.py).
GPT2_LAYERNORM_F32 = Tolerance(2e-5, 2e-5, "float32 LayerNorm vs float64, widths <= 64")
GPT2_MHA_F32 = Tolerance(5e-5, 5e-5, "four float32 linears and a softmax vs float64")
GPT2_BLOCK_F32 = Tolerance(2e-4, 2e-4, "float32 block vs float64")
GPT2_MODEL_F32 = Tolerance(2e-4, 2e-4, "float32 GPTModel logits vs float64, two blocks")
