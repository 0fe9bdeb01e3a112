"""MUTANT (gpt2): Out_head built with a bias."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.model",
    "bug": "out_head built with a bias",
    "run": ["gpt2.model"],
}


class GPTModel(_GPT):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.out_head = torch.nn.Linear(cfg["emb_dim"], cfg["vocab_size"])
