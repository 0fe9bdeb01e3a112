"""MUTANT (encdec): window includes j = i - w (w + 1 keys)."""

import torch

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_local_attention_mask(seq_len, window):
    i = torch.arange(seq_len).view(-1, 1)
    j = torch.arange(seq_len)
    return (j <= i) & (j >= i - window)


MUTANT = {
    "spec": "encdec.local_attention",
    "bug": "window includes j = i - w (w + 1 keys)",
    "run": ["encdec.local_attention"],
    "profile": "encdec",
    "hinted": ["window includes j = i − w (w + 1 keys)"],
    "never_hinted": ["window of w − 1 keys"],
}
