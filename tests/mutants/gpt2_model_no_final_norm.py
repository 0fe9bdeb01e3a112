"""MUTANT (gpt2): Final_norm skipped before out_head."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.model",
    "bug": "final_norm skipped before out_head",
    "run": ["gpt2.model"],
    "hinted": ["final_norm skipped"],
}


class GPTModel(_GPT):
    def forward(self, in_idx):
        t = in_idx.shape[-1]
        x = self.drop_emb(self.tok_emb(in_idx) + self.pos_emb(torch.arange(t)))
        return self.out_head(self.trf_blocks(x))
