"""MUTANT (gpt2): Tokenizer.encode(txt) without allowed_special: <|endoftext|> raises."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTDatasetV1 as _DS

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.dataset",
    "bug": "tokenizer.encode(txt) without allowed_special: <|endoftext|> raises",
    "run": ["gpt2.dataset"],
    "hinted": ["tokenizer.encode(txt) without allowed_special"],
    "strict_only": (
        "SPEC §6.1: MUST texts hold no special token (the book's first printing encodes so); a text with "
        "<|endoftext|> is STRICT and its finding names allowed_special"
    ),
}


class GPTDatasetV1(_DS):
    def __init__(self, txt, tokenizer, max_length, stride):
        ids = tokenizer.encode(txt)
        starts = range(0, len(ids) - max_length, stride)
        self.input_ids = [torch.tensor(ids[s : s + max_length]) for s in starts]
        self.target_ids = [torch.tensor(ids[s + 1 : s + max_length + 1]) for s in starts]
