"""MUTANT: RoPE uses the sequence index 0..seq-1 and ignores token_positions."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_rope as _reference_rope

MUTANT = {
    "spec": "2.rope",
    "bug": "token_positions ignored: rotates by the sequence index",
    "run": ["2.rope"],
    "hinted": ["token_positions ignored"],
    "never_hinted": ["k = 1..d_k/2"],
}


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    seq = in_query_or_key.shape[-2]
    return _reference_rope(d_k, theta, max_seq_len, in_query_or_key, torch.arange(seq, device=in_query_or_key.device))
