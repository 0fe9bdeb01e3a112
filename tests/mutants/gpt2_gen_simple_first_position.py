"""MUTANT (gpt2): Argmax of the first position's logits instead of the last."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.generate_simple",
    "bug": "argmax of the first position's logits instead of the last",
    "run": ["gpt2.generate_simple"],
    "hinted": ["the argmax of the first position's logits"],
}


def generate_text_simple(model, idx, max_new_tokens, context_size):
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(idx[:, -context_size:])[:, 0, :]
        idx = torch.cat((idx, logits.argmax(dim=-1, keepdim=True)), dim=1)
    return idx
