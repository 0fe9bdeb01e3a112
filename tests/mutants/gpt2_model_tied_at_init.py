"""MUTANT (gpt2): Out_head.weight = tok_emb.weight in __init__: the head is tied although the book's model is not."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.model",
    "bug": "out_head.weight = tok_emb.weight in __init__: the head is tied although the book's model is not",
    "run": ["gpt2.model"],
    "hinted": ["out_head.weight is tok_emb.weight (tied at construction)"],
}


class GPTModel(_GPT):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.out_head.weight = self.tok_emb.weight
