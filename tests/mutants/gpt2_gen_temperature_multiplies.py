"""MUTANT (gpt2): Logits multiplied by the temperature instead of divided."""

import torch

from lmspec.reference.gpt2 import *  # noqa: F403

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.generate",
    "bug": "logits multiplied by the temperature instead of divided",
    "run": ["gpt2.generate"],
    "hinted": ["logits multiplied by the temperature"],
}


def generate(model, idx, max_new_tokens, context_size, temperature=0.0, top_k=None, eos_id=None):
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(idx[:, -context_size:])[:, -1, :]
        if top_k is not None:
            kth = torch.topk(logits, top_k)[0][:, -1:]
            logits = torch.where(logits < kth, torch.tensor(float("-inf")), logits)
        if temperature > 0.0:
            nxt = torch.multinomial(torch.softmax(logits * temperature, dim=-1), num_samples=1)
        else:
            nxt = logits.argmax(dim=-1, keepdim=True)
        if nxt == eos_id:
            break
        idx = torch.cat((idx, nxt), dim=1)
    return idx
