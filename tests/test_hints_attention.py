"""§2 hints through the conformance tests' own checks: a likely cause is named
only when its replay (conformance/cs336/oracles/nn_bugs.py) reproduces the
output on the failing input and on the test's pinned second input."""

import pytest
import torch

from lmspec.conformance.cs336 import test_attention
from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.cs336.oracles.nn_bugs import KNOWN_BUGS

NOT_CAUSAL = "not causal (future positions visible)"
SHIFTED = "causal mask shifted by one (i also sees i+1)"
TWO_TOKENS = test_attention._pinned_mha(9, 2, 4, torch.tensor([[0, 1]]), 16)


def _mha_with_mask(kind: str):
    """MHA without RoPE (the adapter's signature) whose causal mask is ``kind``."""

    def run(d_model, num_heads, q_w, k_w, v_w, o_w, x):
        return oracle.mha(x, q_w, k_w, v_w, o_w, num_heads, mask=kind).float()

    return run


def test_on_two_tokens_a_shifted_mask_is_no_mask():
    """The trap: on two tokens, j ≤ i + 1 lets every position see every key."""
    replays = dict(KNOWN_BUGS.thunks("2.mha", *test_attention._oracle_args(TWO_TOKENS)))
    assert torch.equal(replays[NOT_CAUSAL](), replays[SHIFTED]())


@pytest.mark.parametrize(
    ("kind", "cause", "wrong"),
    [("shifted", SHIFTED, NOT_CAUSAL), ("none", NOT_CAUSAL, SHIFTED)],
    ids=["shifted", "none"],
)
def test_mha_names_only_the_mask_bug_its_second_input_confirms(kind, cause, wrong):
    """Failing on two tokens, both mask bugs reproduce the output; the MHA
    test's second input (5 tokens) keeps only the implementation's own."""
    with pytest.raises(AssertionError) as failure:
        test_attention._check_mha(_mha_with_mask(kind), None, "cpu", TWO_TOKENS)
    assert f"likely cause: {cause}" in str(failure.value)
    assert wrong not in str(failure.value)
