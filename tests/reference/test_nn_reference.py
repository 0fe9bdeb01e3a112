"""Self-tests of the reference Transformer LM (reference/nn) and its accounting.

Focused on what the conformance suite does not reach through the adapter:
float64 agreement of each op with the torch built-in it reimplements (the
built-ins are the oracles here; the reference itself must not use them), the
text of the errors, the ablation configurations, and brute-force checks of
``reference.accounting`` (parameters of an instantiated model, FLOPs counted by
torch's dispatcher during a real forward pass).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from lmspec.reference.accounting import (
    FLOP_KEYS,
    activation_counts,
    adamw_memory,
    count_parameters,
    forward_flops,
)
from lmspec.reference.nn import (
    CausalMultiHeadSelfAttention,
    Embedding,
    Linear,
    ModelConfig,
    RMSNorm,
    RotaryPositionalEmbedding,
    SwiGLU,
    TransformerLM,
    default_d_ff,
    load_weights,
    scaled_dot_product_attention,
    silu,
    softmax,
)
from lmspec.reference.nn.attention import CAUSAL_BLOCK, causal_attend

F64 = torch.float64
SMALL = ModelConfig(vocab_size=97, context_length=16, d_model=24, num_layers=2, num_heads=3, d_ff=40)
GPT2_XL = ModelConfig(vocab_size=50257, context_length=1024, d_model=1600, num_layers=48, num_heads=25, d_ff=6400)
ABLATIONS = [
    {"norm": norm, "use_rope": use_rope, "ffn": ffn}
    for norm in ("pre", "post", "none")
    for use_rope in (True, False)
    for ffn in ("swiglu", "silu")
]


def ablation_id(kw: dict) -> str:
    return f"norm={kw['norm']},rope={kw['use_rope']},ffn={kw['ffn']}"


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def assert_exact(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-12) -> None:
    """float64 agreement up to reassociation (a few ulps of O(1) values)."""
    __tracebackhide__ = True
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    err = (actual - expected).abs().max().item() if actual.numel() else 0.0
    assert err <= atol, f"max abs error {err:.3e} > {atol:.0e}"


# --- float64 agreement with torch built-ins (SPEC §2) ----------------------------


def test_linear_matches_f_linear() -> None:
    layer = Linear(8, 5, dtype=F64)
    x = torch.randn(2, 3, 8, dtype=F64)
    assert_exact(layer(x), F.linear(x, layer.weight))


def test_embedding_matches_f_embedding() -> None:
    layer = Embedding(11, 6, dtype=F64)
    ids = torch.randint(0, 11, (2, 3, 4))
    assert_exact(layer(ids), F.embedding(ids, layer.weight))


def test_rmsnorm_matches_f_rms_norm_and_keeps_dtype() -> None:
    norm = RMSNorm(8, eps=1e-5, dtype=F64)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(8))
    x = torch.randn(2, 3, 8, dtype=F64) * 5
    assert_exact(norm(x), F.rms_norm(x, (8,), norm.weight, 1e-5))
    x16 = torch.randn(4, 8, dtype=torch.bfloat16)
    out = RMSNorm(8, dtype=torch.bfloat16)(x16)
    assert out.dtype == torch.bfloat16
    # upcast: the fp32 result rounded once, not a bf16 computation
    expected = F.rms_norm(x16.float(), (8,), eps=1e-5).to(torch.bfloat16)
    assert torch.equal(out, expected)


def test_silu_and_softmax_match_builtins() -> None:
    x = torch.randn(3, 4, 5, dtype=F64) * 4
    assert_exact(silu(x), F.silu(x))
    for dim in (0, 1, -1):
        assert_exact(softmax(x, dim), torch.softmax(x, dim))
    assert_exact(softmax(x + 1000.0, -1), torch.softmax(x, -1))


def test_softmax_all_neg_inf_slice_gives_zeros() -> None:
    x = torch.tensor([[-math.inf, -math.inf], [0.0, -math.inf]])
    assert torch.equal(softmax(x, -1), torch.tensor([[0.0, 0.0], [1.0, 0.0]]))


def test_sdpa_matches_torch_with_broadcast_mask_and_empty_rows() -> None:
    q, k = torch.randn(2, 3, 5, 8, dtype=F64), torch.randn(2, 3, 7, 8, dtype=F64)
    v = torch.randn(2, 3, 7, 4, dtype=F64)
    mask = torch.rand(5, 7) > 0.4
    mask[1] = False  # a query with no allowed key: zero output, like torch's SDPA
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_exact(scaled_dot_product_attention(q, k, v, mask), expected)
    assert_exact(scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))
    assert torch.equal(scaled_dot_product_attention(q, k, v, mask)[..., 1, :], torch.zeros(2, 3, 4, dtype=F64))


def rope_oracle(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Adjacent pairs as complex numbers times e^{iθ}: independent of the table layout."""
    d_k = x.shape[-1]
    freqs = theta ** (-torch.arange(0, d_k, 2, dtype=F64) / d_k)
    angles = positions.to(F64)[..., None] * freqs
    z = torch.view_as_complex(x.to(F64).unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


@pytest.mark.parametrize("positions_shape", ["(seq,)", "(batch, seq)", "None"])
def test_rope_matches_complex_rotation(positions_shape: str) -> None:
    rope = RotaryPositionalEmbedding(10000.0, 8, 32)
    x = torch.randn(2, 3, 6, 8, dtype=F64)  # (batch, heads, seq, d_k)
    if positions_shape == "None":
        positions, out = torch.arange(6), rope(x)
    elif positions_shape == "(seq,)":
        positions = torch.randperm(32)[:6]
        out = rope(x, positions)
    else:
        positions = torch.randint(0, 32, (2, 6))
        out = rope(x, positions[:, None, :])
        positions = positions[:, None, :]
    assert_exact(out, rope_oracle(x, positions, 10000.0))
    out32 = rope(x.float(), None if positions_shape == "None" else positions)
    assert (out32.double() - out).abs().max() < 1e-5  # float32 tables, float32 math


@pytest.mark.parametrize("seq", [1, 3, 4, 5, 11])
def test_causal_attend_blocks_match_sdpa_values_and_gradients(seq: int) -> None:
    """Query blocks of 4 rows: lengths below, at, just over and not a multiple of the block."""
    q, k, v = (torch.randn(2, 3, seq, 6, dtype=F64, requires_grad=True) for _ in range(3))
    out = causal_attend(q, k, v, block=4)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_exact(out, expected)
    weights = torch.randn_like(out)
    grads = torch.autograd.grad((out * weights).sum(), (q, k, v))
    expected_grads = torch.autograd.grad((expected * weights).sum(), (q, k, v))
    for got, want in zip(grads, expected_grads, strict=True):
        assert_exact(got, want)


@pytest.mark.parametrize("seq", [6, CAUSAL_BLOCK + 1])
def test_mha_matches_torch_causal_attention(seq: int) -> None:
    d_model, heads = 16, 4
    attn = CausalMultiHeadSelfAttention(d_model, heads, dtype=F64)
    x = torch.randn(2, 5, seq, d_model, dtype=F64)  # two leading batch axes

    def split(w: torch.Tensor) -> torch.Tensor:
        return (x @ w.T).unflatten(-1, (heads, -1)).transpose(-3, -2)

    q, k, v = (split(p.weight) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    heads_out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = heads_out.transpose(-3, -2).flatten(-2) @ attn.output_proj.weight.T
    assert_exact(attn(x), expected)


def test_mha_with_rope_and_per_batch_positions_matches_oracle() -> None:
    d_model, heads = 16, 2
    rope = RotaryPositionalEmbedding(10000.0, d_model // heads, 32)
    attn = CausalMultiHeadSelfAttention(d_model, heads, rope, dtype=F64)
    x = torch.randn(3, 5, d_model, dtype=F64)
    positions = torch.randint(0, 32, (3, 5))

    def split(w: torch.Tensor) -> torch.Tensor:
        return (x @ w.T).unflatten(-1, (heads, -1)).transpose(-3, -2)

    q, k, v = (split(p.weight) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    q, k = (rope_oracle(t, positions[:, None, :], 10000.0) for t in (q, k))
    heads_out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = heads_out.transpose(-3, -2).flatten(-2) @ attn.output_proj.weight.T
    assert_exact(attn(x, positions), expected)


def test_lm_accepts_unsigned_token_ids() -> None:
    """uint16 is the usual dtype of token files; torch cannot index with it directly."""
    model = TransformerLM(SMALL)
    ids = torch.randint(0, 97, (2, 7))
    assert torch.equal(model(ids.to(torch.uint16)), model(ids))


# --- errors name their values ------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RotaryPositionalEmbedding(10000.0, 7, 16), r"d_k \(7\) must be even"),
        (
            lambda: RotaryPositionalEmbedding(10000.0, 8, 16)(torch.zeros(3, 8), torch.tensor([0, 5, 16])),
            r"token position 16 .* max_seq_len \(16\)",
        ),
        (
            lambda: RotaryPositionalEmbedding(10000.0, 8, 16)(torch.zeros(3, 8), torch.tensor([0, -2, 1])),
            r"token position -2 is negative",
        ),
        (
            lambda: CausalMultiHeadSelfAttention(10, 3),
            r"d_model \(10\) must be divisible by num_heads \(3\)",
        ),
        (lambda: ModelConfig(97, 16, 24, 2, 5, 40), r"d_model \(24\) .* num_heads \(5\)"),
        (lambda: ModelConfig(97, 16, 24, 2, 8, 40), r"head dimension.*\(24 / 8 = 3\) is odd"),
        (lambda: ModelConfig(97, 0, 24, 2, 3, 40), r"context_length \(0\) must be positive"),
        (lambda: ModelConfig(97, 16, 24, 2, 3, 40, norm="mid"), r"norm \('mid'\) must be one of"),
        (lambda: ModelConfig(97, 16, 24, 2, 3, 40, ffn="relu"), r"ffn \('relu'\) must be one of"),
        (
            lambda: TransformerLM(SMALL)(torch.zeros(1, 17, dtype=torch.long)),
            r"sequence length \(17\) exceeds context_length \(16\)",
        ),
        (
            lambda: TransformerLM(SMALL)(torch.tensor([[0, 97]])),
            r"token id 97 is out of range \[0, vocab_size \(97\)\)",
        ),
        (lambda: TransformerLM(SMALL)(torch.tensor([[-1, 3]])), r"token id -1 is out of range"),
    ],
    ids=[
        "rope(odd d_k) -> ValueError",
        "rope(position >= max_seq_len) -> ValueError",
        "rope(negative position) -> ValueError",
        "mha(d_model % heads) -> ValueError",
        "config(d_model % heads) -> ValueError",
        "config(odd head dim with rope) -> ValueError",
        "config(non-positive size) -> ValueError",
        "config(unknown norm) -> ValueError",
        "config(unknown ffn) -> ValueError",
        "lm(seq > context_length) -> ValueError",
        "lm(id >= vocab) -> ValueError",
        "lm(id < 0) -> ValueError",
    ],
)
def test_errors_name_values(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_odd_head_dim_allowed_without_rope() -> None:
    config = ModelConfig(97, 16, 24, 1, 8, 40, use_rope=False)
    assert TransformerLM(config)(torch.tensor([[1, 2, 3]])).shape == (1, 3, 97)


def test_load_weights_lists_every_problem() -> None:
    ffn = SwiGLU(4, 8)
    weights = {
        "w1.weight": torch.zeros(8, 4),
        "w2.weight": torch.zeros(8, 4),
        "w4.weight": torch.zeros(1),
    }
    with pytest.raises(ValueError) as info:
        load_weights(ffn, weights)
    text = str(info.value)
    assert "missing keys (1): w3.weight" in text
    assert "unexpected keys (1): w4.weight" in text
    assert "w2.weight: expected (4, 8), got (8, 4)" in text


def test_load_weights_converts_dtype() -> None:
    layer = Linear(3, 2)
    load_weights(layer, {"weight": torch.ones(2, 3, dtype=F64)})
    assert layer.weight.dtype == torch.float32 and torch.equal(layer.weight, torch.ones(2, 3))


# --- init, defaults ----------------------------------------------------------------


def test_inits_are_truncated_normals() -> None:
    w = Linear(300, 200).weight
    std = math.sqrt(2 / 500)
    assert abs(w.std().item() - std * 0.986) < 0.02 * std  # ±3σ truncation shrinks std by 1.3 %
    assert w.abs().max() <= 3 * std
    e = Embedding(500, 100).weight
    assert e.abs().max() <= 3.0 and abs(e.std().item() - 0.986) < 0.02
    assert torch.equal(RMSNorm(7).weight, torch.ones(7))


def test_default_d_ff_rounds_to_nearest_64() -> None:
    assert [default_d_ff(d) for d in (512, 768, 1600, 16)] == [1344, 2048, 4288, 64]


# --- ablations -----------------------------------------------------------------------


@pytest.mark.parametrize("ablation", ABLATIONS, ids=ablation_id)
def test_ablation_runs_with_expected_keys_and_causality(ablation: dict) -> None:
    config = ModelConfig(97, 16, 24, 2, 3, 40, **ablation)
    model = TransformerLM(config).to(F64)
    keys = set(model.state_dict())
    assert ("layers.0.ln1.weight" in keys) == (ablation["norm"] != "none")
    assert ("ln_final.weight" in keys) == (ablation["norm"] != "none")
    assert ("layers.1.ffn.w3.weight" in keys) == (ablation["ffn"] == "swiglu")
    ids = torch.randint(0, 97, (2, 16))
    logits = model(ids)
    assert logits.shape == (2, 16, 97) and torch.isfinite(logits).all()
    assert_exact(model(ids[:, :9]), logits[:, :9], atol=1e-10)  # a prefix sees no future
    # reloading its own state dict into a fresh model reproduces it
    twin = TransformerLM(config).to(F64)
    load_weights(twin, model.state_dict())
    assert torch.equal(twin(ids), logits)


def test_post_norm_block_output_is_normalised() -> None:
    model = TransformerLM(ModelConfig(97, 16, 24, 1, 3, 40, norm="post"))
    block = model.layers[0]
    y = block(torch.randn(2, 5, 24))
    assert torch.allclose(y.square().mean(-1), torch.ones(2, 5), atol=1e-4)


# --- accounting, checked by brute force ------------------------------------------------


@pytest.mark.parametrize("ablation", ABLATIONS, ids=ablation_id)
def test_count_parameters_matches_instantiated_model(ablation: dict) -> None:
    config = ModelConfig(97, 16, 24, 2, 3, 40, **ablation)
    model = TransformerLM(config)
    assert count_parameters(config) == sum(p.numel() for p in model.parameters() if p.requires_grad)


class MatmulRecorder(TorchDispatchMode):
    """Records 2·m·n·p of every aten.mm / aten.bmm, in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("mm", "bmm"):
            a, b = args[0], args[1]
            batch = a.shape[0] if name == "bmm" else 1
            self.calls.append((name, 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    "config",
    [
        SMALL,
        ModelConfig(50, 12, 32, 3, 4, 64, ffn="silu", norm="none"),
        ModelConfig(31, 8, 12, 1, 2, 20, use_rope=False),
    ],
    ids=["swiglu", "silu-nonorm", "nope"],
)
@pytest.mark.parametrize("seq_len", [None, 5])
def test_forward_flops_match_dispatcher_counts(config: ModelConfig, seq_len: int | None) -> None:
    t = config.context_length if seq_len is None else seq_len
    model = TransformerLM(config)
    ids = torch.randint(0, config.vocab_size, (1, t))
    with FlopCounterMode(display=False) as counter:
        model(ids)
    per_module = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    layers = [f"TransformerLM.layers.{i}" for i in range(config.num_layers)]
    flops = forward_flops(config, seq_len)
    assert list(flops) == list(FLOP_KEYS)
    assert flops["total"] == counter.get_total_flops() == sum(v for k, v in flops.items() if k != "total")
    assert flops["lm_head"] == per_module["TransformerLM.lm_head"]
    assert flops["ffn"] == sum(per_module[f"{layer}.ffn"] for layer in layers)
    assert flops["attn_output"] == sum(per_module[f"{layer}.attn.output_proj"] for layer in layers)
    qkv = sum(per_module[f"{layer}.attn.{p}_proj"] for layer in layers for p in "qkv")
    assert flops["attn_qkv"] == qkv
    # the two batched products of each layer, in call order: Q Kᵀ then weights · V
    with MatmulRecorder() as recorder:
        model(ids)
    bmms = [f for name, f in recorder.calls if name == "bmm"]
    assert len(bmms) == 2 * config.num_layers
    assert flops["attn_scores"] == sum(bmms[0::2])
    assert flops["attn_values"] == sum(bmms[1::2])


def test_adamw_memory_matches_optimizer_state() -> None:
    model = TransformerLM(SMALL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randint(0, 97, (2, 16))).sum().backward()
    optimizer.step()
    grads = sum(p.grad.numel() for p in model.parameters())
    moments = sum(t.numel() for state in optimizer.state.values() for key, t in state.items() if key != "step")
    memory = adamw_memory(SMALL, batch_size=2, dtype_bytes=4)
    assert memory["parameters"] == memory["gradients"] == 4 * grads
    assert memory["optimizer_state"] == 4 * moments
    counts = activation_counts(SMALL, batch_size=2)
    assert memory["activations"] == 4 * sum(counts.values())
    assert memory["total"] == sum(v for k, v in memory.items() if k != "total")
    # activations are linear in the batch size; the rest does not depend on it
    double = adamw_memory(SMALL, batch_size=4, dtype_bytes=4)
    assert double["activations"] == 2 * memory["activations"]
    assert double["parameters"] == memory["parameters"]


def test_gpt2_xl_numbers() -> None:
    """The values in reference/accounting.py's docstring (formulas checked above)."""
    assert count_parameters(GPT2_XL) == 2_127_057_600
    flops = forward_flops(GPT2_XL)
    assert flops["total"] == 4_513_336_524_800
    assert flops["ffn"] == 3_019_898_880_000
    assert adamw_memory(GPT2_XL, batch_size=1)["total"] == 52_067_257_344


# --- adapter -----------------------------------------------------------------------------


@pytest.fixture
def adapter():
    return pytest.importorskip("lmspec.reference.adapter.nn", reason="lmspec.reference.adapter not importable yet")


def test_adapter_builds_on_weights_dtype(adapter) -> None:
    model = TransformerLM(SMALL).to(F64)
    ids = torch.randint(0, 97, (2, 10))
    weights = model.state_dict()
    out = adapter.run_transformer_lm(97, 16, 24, 2, 3, 40, 10000, weights, ids)
    assert out.dtype == F64
    assert torch.equal(out, model(ids))
    block_weights = {k.removeprefix("layers.0."): v for k, v in weights.items() if k.startswith("layers.0.")}
    x = torch.randn(2, 10, 24, dtype=F64)
    assert torch.equal(adapter.run_transformer_block(24, 3, 40, 16, 10000.0, block_weights, x), model.layers[0](x))
    assert set(adapter.__all__) >= {
        "run_linear",
        "run_transformer_lm_ablation",
        "run_forward_flops",
    }
    assert adapter.run_count_parameters(50257, 1024, 1600, 48, 25, 6400) == 2_127_057_600
