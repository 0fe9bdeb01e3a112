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
from lmspec.conformance.gpt2.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import other
from lmspec.conformance.tolerances import Tolerance

TOL = Tolerance(1e-4, 1e-4, "float32 against float32 transformers, two layers")
CFG = o.cfg(vocab=64, context=16, emb=16, heads=4, layers=2, drop=0.1, qkv_bias=True)


@pytest.fixture(scope="module")
def hf():
    return o.hf_gpt2(CFG, seed=0)


def _ids(seed: int, tokens: int) -> torch.Tensor:
    return torch.randint(0, CFG["vocab_size"], (2, tokens), generator=torch.Generator().manual_seed(seed))


#: Second inputs (conformance/hints.py): 9 or 12 tokens, where every order of
#: query, key and value and the untransposed matrices give other logits (on
#: one token swapping query and key changes nothing).
SECOND_IDS = (_ids(7, 9), _ids(8, 12))


def _observed(run, params, ids):
    return run(cfg=CFG, params=params, in_idx=ids), KNOWN_BUGS.thunks("gpt2.load_weights", ids, params, CFG)


@pytest.mark.spec("gpt2.load_weights")
@sg.budget(3)
@given(seed=st.integers(0, 2**31 - 1), tokens=st.integers(1, 16))
def test_loaded_logits_agree_with_transformers(gpt2_load_weights, hf, seed, tokens):
    """The GPT-2 checkpoint's arrays loaded into GPTModel give transformers' logits."""
    params = o.export_checkpoint(hf)
    ids = _ids(seed, tokens)
    got, bugs = _observed(gpt2_load_weights, params, ids)
    second = other(ids, *SECOND_IDS)
    assert_close(
        got,
        o.hf_logits(hf, ids),
        TOL,
        rule="logits after load_weights_into_gpt equal transformers' GPT-2",
        hints=bugs,
        again=lambda: _observed(gpt2_load_weights, params, second),
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
