"""MUTANT (gpt2): Position ids arange(1, tokens+1) instead of arange(tokens)."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.model",
    "bug": "position ids arange(1, tokens+1) instead of arange(tokens)",
    "run": ["gpt2.model"],
    "hinted": ["position ids start at 1"],
}


class GPTModel(_GPT):
    def forward(self, in_idx):
        t = in_idx.shape[-1]
        pos = torch.arange(1, t + 1).clamp(max=self.context_length - 1)
        x = self.drop_emb(self.tok_emb(in_idx) + self.pos_emb(pos))
        return self.out_head(self.final_norm(self.trf_blocks(x)))
