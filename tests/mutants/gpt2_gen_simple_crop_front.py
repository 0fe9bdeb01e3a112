"""MUTANT (gpt2): Idx[:, :context_size]: the first ids instead of the last."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.generate_simple",
    "bug": "idx[:, :context_size]: the first ids instead of the last",
    "run": ["gpt2.generate_simple"],
    "hinted": ["the first context_size ids are kept"],
}


def generate_text_simple(model, idx, max_new_tokens, context_size):
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(idx[:, :context_size])[:, -1, :]
        idx = torch.cat((idx, logits.argmax(dim=-1, keepdim=True)), dim=1)
    return idx
