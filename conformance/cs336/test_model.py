"""SPEC §2 Transformer block, Transformer LM, ablations and resource accounting.

Oracles: the block and the LM composed in float64 from the oracle parts and
addressed by the SPEC §2 state-dict names (conformance/cs336/oracles/nn.py). The
accounting oracle counts parameters from those weight shapes and FLOPs with
torch's FlopCounterMode on the oracle forward (meta device): nothing is
copied from an implementation.

MUST tests use the contract (SPEC §2): the block on (batch, seq, d_model), the
LM on (batch, seq) ids. Other numbers of leading dims are STRICT tests. The
ablation and accounting items are the extended profile (optional functions).
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmspec.conformance import hints, near
from lmspec.conformance import tolerances as tol
from lmspec.conformance.asserts import assert_close, assert_equal, assert_shape
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.oracles.nn_bugs import FLOPS, KNOWN_BUGS, PARAMETERS
from lmspec.conformance.cs336.parts import ImplParts, swaps
from lmspec.conformance.cs336.strategies import nn as sn

# Block/LM examples cost tens of ms each (the oracle loops over heads): a
# third of the profile's examples keeps the module fast; --max-examples and
# the thorough profile scale it too.
FEW = settings(max_examples=max(5, settings.default.max_examples // 3))
FEWER = settings(max_examples=max(3, settings.default.max_examples // 6))
strict = pytest.mark.strict

ABLATIONS = [
    ("post", True, "swiglu"),
    ("none", True, "swiglu"),
    ("pre", False, "swiglu"),
    ("pre", True, "silu"),
    ("post", False, "silu"),
    ("pre", True, "swiglu"),
]
ABLATION_IDS = [f"norm={n},rope={r},ffn={f}" for n, r, f in ABLATIONS]


def _cpu(t):
    return torch.as_tensor(t).detach().cpu()


def _on(weights, device):
    return {k: v.to(device) for k, v in weights.items()}


def _pinned_block(seed: int, batch: int, seq: int, heads: int, d_k: int, d_ff: int, **ablation) -> sn.BlockCase:
    """``ablation``: the weights of block_weight_shapes(norm=, ffn=)."""
    g = sn.generator(seed)
    d_model = heads * d_k
    weights = sn.random_weights(g, oracle.block_weight_shapes(d_model, d_ff, **ablation))
    return sn.BlockCase(sn.randn(g, batch, seq, d_model), weights, d_model, heads, d_ff, 16, 10000.0)


def _pinned_lm(seed: int, batch: int, cfg: oracle.ModelConfig, **ablation) -> sn.LMCase:
    """``batch`` sequences of ``cfg.context_length`` ids."""
    g = sn.generator(seed)
    weights = sn.random_weights(g, oracle.lm_weight_shapes(cfg, **ablation))
    return sn.LMCase(torch.randint(0, cfg.vocab_size, (batch, cfg.context_length), generator=g), weights, cfg)


# Second inputs (a likely cause is named only when it also reproduces the
# output there; the other one when the failing input is one): small, with 2-3
# heads of d_k 4 and 4-5 tokens, so RoPE and the norms all change the output;
# the ablation tests' have the weights of their ablation.
def _second_blocks(**ablation) -> tuple[sn.BlockCase, ...]:
    return _pinned_block(5, 2, 5, 2, 4, 12, **ablation), _pinned_block(6, 1, 4, 3, 4, 20, **ablation)


def _second_lms(**ablation) -> tuple[sn.LMCase, ...]:
    return (
        _pinned_lm(7, 2, oracle.ModelConfig(24, 5, 8, 2, 2, 16, 10000.0), **ablation),
        _pinned_lm(8, 1, oracle.ModelConfig(17, 4, 12, 1, 3, 20, 500.0), **ablation),
    )


SECOND_BLOCKS = _second_blocks()
SECOND_LMS = _second_lms()


def _lm_args(cfg):
    return (
        cfg.vocab_size,
        cfg.context_length,
        cfg.d_model,
        cfg.num_layers,
        cfg.num_heads,
        cfg.d_ff,
        cfg.rope_theta,
    )


# --- block ---------------------------------------------------------------------------
def _block_observed(run_transformer_block, impl, device, case):
    """The implementation's block, the known bugs replayed on ``case`` and the
    oracle's block with each of the implementation's parts swapped in."""
    weights = _on(case.weights, device)
    out = run_transformer_block(
        case.d_model, case.num_heads, case.d_ff, case.max_seq_len, case.theta, weights, case.x.to(device)
    )

    def composite(**kw):
        return oracle.block(case.x, case.weights, case.num_heads, case.theta, **kw)

    inside = ImplParts(impl, device).of("2.block", max_seq_len=case.max_seq_len)
    parts = hints.part_hints(swaps(composite, inside), composite, tol.BLOCK_F32)
    return out, KNOWN_BUGS.thunks("2.block", case.x, case.weights, case.num_heads, case.theta) + parts


def _check_block(run_transformer_block, impl, device, case):
    __tracebackhide__ = True
    out, bugs = _block_observed(run_transformer_block, impl, device, case)
    assert_shape(out, case.x.shape, rule="block output is (..., seq, d_model)")
    second = hints.other(case, *SECOND_BLOCKS)
    assert_close(
        out,
        oracle.block(case.x, case.weights, case.num_heads, case.theta),
        tol.BLOCK_F32,
        rule="pre-norm Transformer block (float32 vs float64)",
        hints=bugs,
        again=lambda: _block_observed(run_transformer_block, impl, device, second),
        near=(near.scale, near.positions(-2)),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, d_ff={case.d_ff}, θ={case.theta}",
    )


@pytest.mark.spec("2.block")
@FEW
@given(case=sn.block_cases(lead_dims=sn.BATCH))
def test_block_is_prenorm(run_transformer_block, impl, device, case):
    """z = x + MHA(RMSNorm₁(x)), y = z + SwiGLU(RMSNorm₂(z)), RoPE at 0..seq-1,
    on (batch, seq, d_model) inputs."""
    _check_block(run_transformer_block, impl, device, case)


@pytest.mark.spec("2.block")
@strict
@FEWER
@given(case=sn.block_cases(lead_dims=sn.ANY_LEAD))
def test_block_any_leading_dims(run_transformer_block, impl, device, case):
    """STRICT: the block works for any number of leading dims ((seq, d_model), 4-D...)."""
    _check_block(run_transformer_block, impl, device, case)


# --- LM --------------------------------------------------------------------------------
def _lm_observed(run_transformer_lm, impl, device, case):
    """The implementation's logits, the known bugs replayed on ``case`` and the
    oracle's LM with each of the implementation's parts swapped in."""
    ids, weights, cfg = case
    out = run_transformer_lm(*_lm_args(cfg), _on(weights, device), ids.to(device))

    def composite(**kw):
        return oracle.lm(ids, weights, cfg, **kw)

    lm_parts = ImplParts(impl, device).of("2.lm", max_seq_len=cfg.context_length, d_ff=cfg.d_ff)
    parts = hints.part_hints(swaps(composite, lm_parts), composite, tol.LM_F32)
    return out, KNOWN_BUGS.thunks("2.lm", ids, weights, cfg) + parts


def _check_lm(run_transformer_lm, impl, device, case, *, rule: str, shape_rule: str, context: str):
    __tracebackhide__ = True
    ids, weights, cfg = case
    out, bugs = _lm_observed(run_transformer_lm, impl, device, case)
    assert_shape(out, (*ids.shape, cfg.vocab_size), rule=shape_rule)
    second = hints.other(case, *SECOND_LMS)
    assert_close(
        out,
        oracle.lm(ids, weights, cfg),
        tol.LM_F32,
        rule=rule,
        hints=bugs,
        again=lambda: _lm_observed(run_transformer_lm, impl, device, second),
        near=(near.scale, near.positions(-2)),
        context=context,
    )


@pytest.mark.spec("2.lm")
@FEW
@given(case=sn.lm_cases())
def test_lm_matches_float64(run_transformer_lm, impl, device, case):
    """Embedding → blocks → final RMSNorm → LM head: logits (batch, seq, vocab)."""
    _check_lm(
        run_transformer_lm,
        impl,
        device,
        case,
        rule="Transformer LM logits (float32 vs float64)",
        shape_rule="LM logits are (batch, seq, vocab_size)",
        context=f"{case.config}, ids {case.token_ids.tolist()}",
    )


@pytest.mark.spec("2.lm")
@strict
@FEWER
@given(case=sn.lm_cases(lead_dims=(0, 2)))
def test_lm_any_id_shape(run_transformer_lm, impl, device, case):
    """STRICT: ids of other shapes than (batch, seq) — one unbatched sequence
    (seq,), or (a, b, seq) — give logits (..., seq, vocab)."""
    _check_lm(
        run_transformer_lm,
        impl,
        device,
        case,
        rule="Transformer LM logits on ids of any shape (float32 vs float64)",
        shape_rule="LM logits are (..., seq, vocab_size)",
        context=f"{case.config}, ids {case.token_ids.tolist()}",
    )


@pytest.mark.spec("2.lm")
@FEWER
@given(case=sn.lm_cases(full_context=True))
def test_lm_accepts_full_context_length(run_transformer_lm, impl, device, case):
    """An input of exactly context_length tokens works and matches the oracle."""
    _check_lm(
        run_transformer_lm,
        impl,
        device,
        case,
        rule="LM logits at seq = context_length",
        shape_rule="LM logits are (batch, seq, vocab_size)",
        context=f"{case.config}",
    )


@pytest.mark.spec("2.lm")
@FEW
@given(case=sn.lm_cases(full_context=True), cut=st.integers(0, 7), seed=sn.seeds)
def test_lm_is_causal(run_transformer_lm, device, case, cut, seed):
    """Logits at position i never depend on tokens at positions > i."""
    ids, weights, cfg = case
    cut = cut % ids.shape[-1]
    changed = ids.clone()
    tail = changed[:, cut + 1 :]
    changed[:, cut + 1 :] = torch.randint(0, cfg.vocab_size, tail.shape, generator=torch.Generator().manual_seed(seed))
    w = _on(weights, device)
    base = _cpu(run_transformer_lm(*_lm_args(cfg), w, ids.to(device)))
    out = _cpu(run_transformer_lm(*_lm_args(cfg), w, changed.to(device)))
    assert_close(
        out[:, : cut + 1],
        base[:, : cut + 1],
        tol.LM_F32,
        rule=f"causal LM: logits at positions ≤ {cut} must not change when later tokens change",
        context=f"{cfg}, ids {ids.tolist()} -> {changed.tolist()}",
    )


@pytest.mark.spec("2.lm")
@FEW
@given(case=sn.lm_cases(full_context=True), length=st.integers(1, 8))
def test_lm_truncated_input_gives_prefix_logits(run_transformer_lm, device, case, length):
    """Logits of the first s tokens alone equal the first s rows of the full logits."""
    ids, weights, cfg = case
    s = 1 + (length - 1) % ids.shape[-1]
    w = _on(weights, device)
    full = _cpu(run_transformer_lm(*_lm_args(cfg), w, ids.to(device)))
    prefix = run_transformer_lm(*_lm_args(cfg), w, ids[:, :s].to(device))
    assert_shape(prefix, (ids.shape[0], s, cfg.vocab_size), rule="LM logits are (batch, seq, vocab_size)")
    assert_close(
        prefix,
        full[:, :s],
        tol.LM_F32,
        rule=f"LM(ids[:, :{s}]) = LM(ids)[:, :{s}]",
        context=f"{cfg}",
    )


# --- ablations (extended profile) ------------------------------------------------------
@pytest.mark.spec("2.ablations")
@given(case=sn.swiglu_cases(lead_dims=sn.BATCH_SEQ))
def test_silu_ffn_matches_float64(run_silu_ffn, device, case):
    """Ablation FFN: W2 SiLU(W1 x), W1: (d_ff, d_model), W2: (d_model, d_ff)."""
    x, w1, w2, _ = case
    d_ff, d_model = w1.shape
    out = run_silu_ffn(d_model, d_ff, w1.to(device), w2.to(device), x.to(device))
    assert_close(
        out,
        oracle.silu_ffn(x, w1, w2),
        tol.SWIGLU_F32,
        rule="SiLU FFN W2 SiLU(W1 x) (float32 vs float64)",
        context=f"x{tuple(x.shape)}, d_ff={d_ff}",
    )


@pytest.mark.spec("2.ablations")
@pytest.mark.parametrize(("norm", "use_rope", "ffn"), ABLATIONS, ids=ABLATION_IDS)
@FEWER
@given(data=st.data())
def test_block_ablation_matches_float64(run_transformer_block_ablation, device, norm, use_rope, ffn, data):
    """Block ablations: post-norm z = RMSNorm(x + MHA(x)), no norm, NoPE, SiLU FFN."""
    case = data.draw(sn.block_cases(lead_dims=sn.BATCH, norm=norm, ffn=ffn), label="case")
    ablation = {"norm": norm, "use_rope": use_rope, "ffn": ffn}

    def observed(case):
        args = case.d_model, case.num_heads, case.d_ff, case.max_seq_len, case.theta
        out = run_transformer_block_ablation(*args, _on(case.weights, device), case.x.to(device), **ablation)
        return out, KNOWN_BUGS.thunks("2.ablations", case.x, case.weights, case.num_heads, case.theta, **ablation)

    out, bugs = observed(case)
    theta = case.theta if use_rope else None
    second = hints.other(case, *_second_blocks(norm=norm, ffn=ffn))
    assert_close(
        out,
        oracle.block(case.x, case.weights, case.num_heads, theta, norm=norm, ffn=ffn),
        tol.BLOCK_F32,
        rule=f"block ablation norm={norm}, rope={use_rope}, ffn={ffn}",
        hints=bugs,
        again=lambda: observed(second),
        context=f"x{tuple(case.x.shape)}, heads={case.num_heads}, d_ff={case.d_ff}",
    )


@pytest.mark.spec("2.ablations")
@pytest.mark.parametrize(("norm", "use_rope", "ffn"), ABLATIONS, ids=ABLATION_IDS)
@FEWER
@given(data=st.data())
def test_lm_ablation_matches_float64(run_transformer_lm_ablation, device, norm, use_rope, ffn, data):
    """LM ablations; norm="none" also drops ln_final, "post" keeps it."""
    case = data.draw(sn.lm_cases(norm=norm, ffn=ffn), label="case")
    ablation = {"norm": norm, "use_rope": use_rope, "ffn": ffn}

    def observed(case):
        ids, weights, cfg = case
        out = run_transformer_lm_ablation(*_lm_args(cfg), _on(weights, device), ids.to(device), **ablation)
        return out, KNOWN_BUGS.thunks("2.ablations", ids, weights, cfg, **ablation)

    out, bugs = observed(case)
    second = hints.other(case, *_second_lms(norm=norm, ffn=ffn))
    assert_close(
        out,
        oracle.lm(*case, **ablation),
        tol.LM_F32,
        rule=f"LM ablation norm={norm}, rope={use_rope}, ffn={ffn}",
        hints=bugs,
        again=lambda: observed(second),
        context=f"{case.config}",
    )


# --- accounting (extended profile) ------------------------------------------------------
def _acct_args(cfg):
    return cfg.vocab_size, cfg.context_length, cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.d_ff


accounting_configs = sn.model_configs(max_vocab=1000, max_context=64, max_layers=3, max_heads=4, max_dk=16)


#: The accounting tests' second inputs: a switch (oracles/nn_bugs.py, "2.accounting")
#: is named only when its replay gives the implementation's count here too.
SECOND_ACCOUNTING = (
    oracle.ModelConfig(vocab_size=97, context_length=12, d_model=24, num_layers=3, num_heads=3, d_ff=40),
    oracle.ModelConfig(vocab_size=50, context_length=7, d_model=16, num_layers=2, num_heads=2, d_ff=48),
)


def _flops(got) -> dict[str, int]:
    return {k: int(v) for k, v in dict(got).items()}


def _accounting_causes(kind: str, run, cfg) -> list[str]:
    """The "2.accounting" switches of ``kind`` (PARAMETERS or FLOPS) whose replay
    gives what the implementation gives on ``cfg``."""
    got = int(run(*_acct_args(cfg))) if kind == PARAMETERS else _flops(run(*_acct_args(cfg)))
    named = []
    for bug in KNOWN_BUGS.of("2.accounting"):
        if bug.cause.startswith(kind):
            want = bug.replay(cfg)
            if got == (want if kind == PARAMETERS else {k: want[k] for k in want if k in got}):
                named.append(bug.cause)
    return named


def _check_count_parameters(run_count_parameters, cfg, rule="parameter count = sum of state-dict weight sizes"):
    __tracebackhide__ = True
    second = hints.other(cfg, *SECOND_ACCOUNTING)
    hints.failing_with_causes(
        lambda: assert_equal(
            int(run_count_parameters(*_acct_args(cfg))), oracle.parameter_count(cfg), rule=rule, context=f"{cfg}"
        ),
        lambda: hints.confirmed(
            _accounting_causes(PARAMETERS, run_count_parameters, cfg),
            lambda: _accounting_causes(PARAMETERS, run_count_parameters, second),
        ),
    )


def _check_forward_flops(run_forward_flops, cfg, expected, rule):
    __tracebackhide__ = True
    second = hints.other(cfg, *SECOND_ACCOUNTING)
    got = _flops(run_forward_flops(*_acct_args(cfg)))
    hints.failing_with_causes(
        lambda: assert_equal({k: got[k] for k in expected if k in got}, expected, rule=rule, context=f"{cfg}"),
        lambda: hints.confirmed(
            _accounting_causes(FLOPS, run_forward_flops, cfg),
            lambda: _accounting_causes(FLOPS, run_forward_flops, second),
        ),
    )


@pytest.mark.spec("2.accounting")
@given(cfg=accounting_configs)
def test_count_parameters_matches_weight_shapes(run_count_parameters, cfg):
    """Trainable parameters = the total size of the SPEC §2 state-dict weights
    (untied embedding and LM head, two gains per block and a final one)."""
    _check_count_parameters(run_count_parameters, cfg)


@pytest.mark.spec("2.accounting")
@FEWER
@given(cfg=accounting_configs)
def test_forward_flops_match_flop_counter(run_forward_flops, cfg):
    """Forward matmul FLOPs (2mnp) per component over one context_length
    sequence equal torch's FlopCounterMode count of the oracle forward."""
    _check_forward_flops(
        run_forward_flops,
        cfg,
        oracle.forward_flops(cfg),
        "forward matmul FLOPs per component (attn_qkv ... lm_head, total)",
    )


@pytest.mark.spec("2.accounting")
def test_gpt2_xl_accounting(run_count_parameters, run_forward_flops):
    """GPT-2 XL (SPEC §2 shape): parameters from the weight shapes, FLOPs from
    FlopCounterMode on the oracle forward (one layer, times 48)."""
    cfg = oracle.GPT2_XL
    _check_count_parameters(run_count_parameters, cfg, rule="GPT-2 XL parameter count")
    expected = oracle.forward_flops(cfg, one_layer_scaled=True)
    _check_forward_flops(run_forward_flops, cfg, expected, "GPT-2 XL forward FLOPs")
