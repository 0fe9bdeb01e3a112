"""MUTANT (gpt2): Range(0, len(ids) - max_length - 1, stride): the last window is lost."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTDatasetV1 as _DS

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.dataset",
    "bug": "range(0, len(ids) - max_length - 1, stride): the last window is lost",
    "run": ["gpt2.dataset"],
    "hinted": ["windows stop one early"],
}


class GPTDatasetV1(_DS):
    def __init__(self, txt, tokenizer, max_length, stride):
        ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        starts = range(0, len(ids) - max_length - 1, stride)
        self.input_ids = [torch.tensor(ids[s : s + max_length]) for s in starts]
        self.target_ids = [torch.tensor(ids[s + 1 : s + max_length + 1]) for s in starts]
