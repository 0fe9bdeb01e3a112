"""MUTANT (gpt2): The position embedding is never added."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTModel as _GPT

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.model",
    "bug": "the position embedding is never added",
    "run": ["gpt2.model"],
    "hinted": ["the position embedding never added"],
}


class GPTModel(_GPT):
    def forward(self, in_idx):
        x = self.drop_emb(self.tok_emb(in_idx))
        return self.out_head(self.final_norm(self.trf_blocks(x)))
