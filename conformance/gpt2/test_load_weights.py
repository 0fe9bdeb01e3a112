"""SPEC §6.1 load_weights_into_gpt: a ``transformers`` GPT-2 built locally
from a small config (no download), its weights exported to the original
checkpoint's layout; after loading, the reader's logits agree with it."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmspec.conformance.asserts import assert_close
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.tolerances import Tolerance

TOL = Tolerance(1e-4, 1e-4, "float32 against float32 transformers, two layers")
CFG = o.cfg(vocab=64, context=16, emb=16, heads=4, layers=2, drop=0.1, qkv_bias=True)


@pytest.fixture(scope="module")
def hf():
    return o.hf_gpt2(CFG, seed=0)


@pytest.mark.spec("gpt2.load_weights")
@sg.budget(3)
@given(seed=st.integers(0, 2**31 - 1), tokens=st.integers(1, 16))
def test_loaded_logits_agree_with_transformers(gpt2_load_weights, hf, seed, tokens):
    """The GPT-2 checkpoint's arrays loaded into GPTModel give transformers' logits."""
    params = o.export_checkpoint(hf)
    ids = torch.randint(0, CFG["vocab_size"], (2, tokens), generator=torch.Generator().manual_seed(seed))
    got = gpt2_load_weights(cfg=CFG, params=params, in_idx=ids)
    expected = o.hf_logits(hf, ids)

    def replay(**kw):
        return lambda: o.model(ids, o.book_weights_from_checkpoint(params, CFG, **kw), CFG)

    hints = [
        (f"c_attn split in the order {order} instead of query, key, value", replay(qkv_order=order))
        for order in ((0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1))
    ]
    hints.append(("c_attn's query/key/value matrices not transposed into Linear", replay(attn_transposed=False)))
    assert_close(
        got,
        expected,
        TOL,
        rule="logits after load_weights_into_gpt equal transformers' GPT-2",
        hints=hints,
        context=f"ids{tuple(ids.shape)}",
    )


@pytest.mark.spec("gpt2.load_weights")
def test_shape_mismatch_raises(gpt2_load_weights, hf):
    """Arrays that do not fit the model (wpe of 20 rows for context_length 16) raise."""
    params = o.export_checkpoint(hf)
    params["wpe"] = np.concatenate([params["wpe"], params["wpe"][:4]])
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(Exception) as info:
        gpt2_load_weights(cfg=CFG, params=params, in_idx=ids)
    assert info.value is not None
