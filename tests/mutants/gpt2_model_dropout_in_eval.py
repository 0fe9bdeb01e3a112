"""MUTANT (gpt2): Embedding dropout through F.dropout(training=True): active in eval mode."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.model",
    "bug": "embedding dropout through F.dropout(training=True): active in eval mode",
    "run": ["gpt2.model"],
    "hinted": ["the embeddings' dropout active in eval mode"],
}


class GPTModel(_GPT):
    def forward(self, in_idx):
        t = in_idx.shape[-1]
        x = self.tok_emb(in_idx) + self.pos_emb(torch.arange(t))
        x = torch.nn.functional.dropout(x, self.drop_emb.p, training=True)
        return self.out_head(self.final_norm(self.trf_blocks(x)))
