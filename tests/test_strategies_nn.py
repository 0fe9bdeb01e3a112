"""Every SPEC §2 strategy (conformance/cs336/strategies/nn.py) yields valid values:
consistent shapes, dtypes and ranges, within the module's size caps."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.strategies import nn as sn

FEW = settings(max_examples=10)


def _lead_ok(shape: tuple[int, ...], max_dims: int = sn.MAX_LEAD_DIMS) -> bool:
    return len(shape) <= max_dims and all(1 <= s <= sn.MAX_LEAD_SIZE for s in shape)


def _broadcasts(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    try:
        return torch.broadcast_shapes(small, big) == torch.Size(big)
    except RuntimeError:
        return False


@FEW
@given(shape=sn.leading_shapes())
def test_leading_shapes(shape):
    assert isinstance(shape, tuple) and _lead_ok(shape)


@FEW
@given(data=st.data())
def test_leading_shapes_keep_to_the_requested_numbers_of_dims(data):
    dims = data.draw(st.sampled_from([sn.BATCH, sn.BATCH_SEQ, sn.BATCH_OR_HEADS, sn.ANY_LEAD]), label="dims")
    shape = data.draw(sn.leading_shapes(dims=dims), label="shape")
    assert len(shape) in dims and _lead_ok(shape)


def test_contract_lead_dims_are_the_specs():
    """SPEC §2 "Shapes": (batch, seq, d) for Linear, SwiGLU, RMSNorm (two leading
    dims before d), MHA and the block (one before seq), SDPA and RoPE with or
    without a head axis."""
    assert sn.BATCH_SEQ == (2,) and sn.BATCH == (1,) and sn.BATCH_OR_HEADS == (1, 2)
    assert set(sn.ANY_LEAD) == set(range(sn.MAX_LEAD_DIMS + 1))


@FEW
@given(data=st.data())
def test_broadcast_of_broadcasts(data):
    shape = data.draw(sn.leading_shapes(), label="shape")
    small = data.draw(sn.broadcast_of(shape), label="broadcast")
    assert len(small) <= len(shape) and _broadcasts(small, shape)


@FEW
@given(case=sn.linear_cases())
def test_linear_cases(case):
    x, w = case
    assert x.dtype == w.dtype == torch.float32 and w.dim() == 2
    assert x.shape[-1] == w.shape[1] and _lead_ok(tuple(x.shape[:-1]))
    assert max(w.shape) <= sn.MAX_WIDTH and x.isfinite().all()


@FEW
@given(case=sn.linear_cases(integer=True))
def test_integer_linear_cases_are_exact_in_float32(case):
    x, w = case
    assert (x == x.round()).all() and (w == w.round()).all()
    assert x.abs().max() <= 8 and w.abs().max() <= 8  # |sums| ≤ 64·48 ≪ 2^24: exact


@FEW
@given(case=sn.embedding_cases())
def test_embedding_cases(case):
    w, ids = case
    assert ids.dtype == torch.int64 and ids.dim() >= 1
    assert ids.numel() == 0 or (ids.min() >= 0 and ids.max() < w.shape[0])


@FEW
@given(case=sn.rmsnorm_cases())
def test_rmsnorm_cases(case):
    x, g, eps = case
    assert g.shape == (x.shape[-1],) and eps in sn.EPSILONS and eps > 0
    assert _lead_ok(tuple(x.shape[:-1]))


@FEW
@given(x=sn.activations())
def test_activations(x):
    assert x.dtype == torch.float32 and x.dim() >= 1 and x.isfinite().all()


@FEW
@given(case=sn.swiglu_cases())
def test_swiglu_cases(case):
    x, w1, w2, w3 = case
    d_ff, d_model = w1.shape
    assert w3.shape == (d_ff, d_model) and w2.shape == (d_model, d_ff) and x.shape[-1] == d_model


@FEW
@given(case=sn.softmax_cases())
def test_softmax_cases(case):
    x, dim = case
    assert 1 <= x.dim() <= 4 and -x.dim() <= dim < x.dim()


@FEW
@given(case=sn.softmax_cases(grid=True))
def test_softmax_grid_cases_shift_exactly(case):
    x, _ = case
    assert ((x * 64) == (x * 64).round()).all() and x.abs().max() < 8
    assert torch.equal((x + 1000) - 1000, x)


@FEW
@given(case=sn.rope_cases())
def test_rope_cases(case):
    x, positions, theta, max_seq_len = case
    assert x.shape[-1] % 2 == 0 and x.shape[-1] <= sn.MAX_ROPE_DK
    assert positions.dtype == torch.int64 and positions.shape[-1] == x.shape[-2]
    assert _broadcasts(tuple(positions.shape), tuple(x.shape[:-1]))
    assert positions.min() >= 0 and positions.max() < max_seq_len <= sn.MAX_POSITION
    assert x.shape[-2] <= max_seq_len and theta in sn.THETAS


@FEW
@given(case=sn.sdpa_cases())
def test_sdpa_cases_have_two_sided_masks(case):
    q, k, v, mask = case
    assert q.shape[-1] == k.shape[-1] and k.shape[:-1] == v.shape[:-1]
    assert mask.dtype == torch.bool and mask.shape[-2:] == (q.shape[-2], k.shape[-2])
    assert _broadcasts(tuple(mask.shape[:-2]), tuple(q.shape[:-2]))
    assert mask.any(-1).all() and (~mask).any(-1).all()  # every row: a True and a False


@FEW
@given(case=sn.mha_cases())
def test_mha_cases(case):
    d_model = case.x.shape[-1]
    assert d_model % case.num_heads == 0 and (d_model // case.num_heads) % 2 == 0
    for w in (case.q_w, case.k_w, case.v_w, case.o_w):
        assert w.shape == (d_model, d_model)
    seq = case.x.shape[-2]
    assert case.positions.shape[-1] == seq and case.positions.max() < case.max_seq_len
    assert seq <= case.max_seq_len
    assert _broadcasts(tuple(case.positions.shape), tuple(case.x.shape[:-1]))


@FEW
@given(data=st.data())
def test_block_cases_match_weight_shapes(data):
    norm = data.draw(st.sampled_from(["pre", "post", "none"]), label="norm")
    ffn = data.draw(st.sampled_from(["swiglu", "silu"]), label="ffn")
    case = data.draw(sn.block_cases(norm=norm, ffn=ffn), label="case")
    expected = oracle.block_weight_shapes(case.d_model, case.d_ff, norm=norm, ffn=ffn)
    assert {k: tuple(v.shape) for k, v in case.weights.items()} == expected
    assert case.x.shape[-1] == case.d_model and case.x.shape[-2] <= case.max_seq_len
    assert case.d_model % case.num_heads == 0 and (case.d_model // case.num_heads) % 2 == 0


@FEW
@given(cfg=sn.model_configs())
def test_model_configs(cfg):
    assert cfg.d_model % cfg.num_heads == 0 and (cfg.d_model // cfg.num_heads) % 2 == 0
    assert cfg.vocab_size >= 2 and cfg.context_length >= 1 and cfg.num_layers >= 1 and cfg.d_ff >= 1


@FEW
@given(case=sn.lm_cases(), full=sn.lm_cases(full_context=True))
def test_lm_cases(case, full):
    for ids, weights, cfg in (case, full):
        assert ids.dtype == torch.int64 and ids.dim() == 2
        assert 1 <= ids.shape[1] <= cfg.context_length and ids.max() < cfg.vocab_size
        assert {k: tuple(v.shape) for k, v in weights.items()} == oracle.lm_weight_shapes(cfg)
    assert full.token_ids.shape[1] == full.config.context_length


@FEW
@given(
    lin=sn.linear_cases(lead_dims=sn.BATCH_SEQ),
    norm=sn.rmsnorm_cases(lead_dims=sn.BATCH_SEQ),
    ffn=sn.swiglu_cases(lead_dims=sn.BATCH_SEQ),
    emb=sn.embedding_cases(lead_dims=sn.BATCH),
    act=sn.activations(lead_dims=sn.MATRIX_OR_BATCH_SEQ),
)
def test_contract_cases_have_contract_shapes(lin, norm, ffn, emb, act):
    assert lin.x.dim() == norm.x.dim() == ffn.x.dim() == 3
    assert emb.token_ids.dim() == 2 and act.dim() in (2, 3)


@FEW
@given(case=sn.rope_cases(lead_dims=sn.BATCH_OR_HEADS, contract_positions=True))
def test_contract_rope_cases(case):
    """(batch, seq, d_k) with positions (seq,), (1, seq) or (batch, seq);
    (batch, heads, seq, d_k) with positions (seq,) or (1, seq)."""
    x, positions = case.x, case.positions
    assert x.dim() in (3, 4)
    allowed = [(x.shape[-2],), (1, x.shape[-2])] + ([(x.shape[0], x.shape[-2])] if x.dim() == 3 else [])
    assert tuple(positions.shape) in allowed


@FEW
@given(case=sn.sdpa_cases(lead_dims=sn.BATCH_OR_HEADS, contract_masks=True))
def test_contract_sdpa_cases(case):
    q, k, v, mask = case
    assert q.dim() in (3, 4) and k.dim() == v.dim() == q.dim()
    assert mask.shape in (torch.Size(q.shape[:-1] + k.shape[-2:-1]), torch.Size((q.shape[-2], k.shape[-2])))


@FEW
@given(case=sn.mha_cases(lead_dims=sn.BATCH, contract_positions=True))
def test_contract_mha_cases(case):
    assert case.x.dim() == 3
    assert tuple(case.positions.shape) in ((1, case.x.shape[1]), (case.x.shape[0], case.x.shape[1]))


@FEW
@given(block=sn.block_cases(lead_dims=sn.BATCH), lm=sn.lm_cases(lead_dims=(0, 2)))
def test_block_and_lm_lead_dims(block, lm):
    assert block.x.dim() == 3 and lm.token_ids.dim() in (1, 3)
