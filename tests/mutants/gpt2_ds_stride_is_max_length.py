"""MUTANT (gpt2): Windows advance by max_length whatever the stride."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTDatasetV1 as _DS

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.dataset",
    "bug": "windows advance by max_length whatever the stride",
    "run": ["gpt2.dataset"],
    "hinted": ["windows advance by max_length"],
}


class GPTDatasetV1(_DS):
    def __init__(self, txt, tokenizer, max_length, stride):
        ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        starts = range(0, len(ids) - max_length, max_length)
        self.input_ids = [torch.tensor(ids[s : s + max_length]) for s in starts]
        self.target_ids = [torch.tensor(ids[s + 1 : s + max_length + 1]) for s in starts]
