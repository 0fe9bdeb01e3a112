"""MUTANT (gpt2): Targets equal the inputs (not shifted by one)."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTDatasetV1 as _DS

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.dataset",
    "bug": "targets equal the inputs (not shifted by one)",
    "run": ["gpt2.dataset"],
    "hinted": ["targets not shifted by one"],
}


class GPTDatasetV1(_DS):
    def __init__(self, txt, tokenizer, max_length, stride):
        ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        starts = range(0, len(ids) - max_length, stride)
        self.input_ids = [torch.tensor(ids[s : s + max_length]) for s in starts]
        self.target_ids = [torch.tensor(ids[s : s + max_length]) for s in starts]
