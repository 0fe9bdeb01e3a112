"""MUTANT: one sampling step that ignores the generator argument (draws from torch's global RNG)."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.generation import temperature_softmax, top_p_filter

MUTANT = {
    "spec": "4.generation",
    "bug": "torch.multinomial without generator=: a seeded generator does not repeat the samples",
    "run": ["4.generation"],
    "hinted": ["the generator argument is never drawn from"],
}


def run_sample_next_token(logits, temperature, top_p, generator):
    if temperature == 0:
        return int(logits.argmax())
    probs = top_p_filter(temperature_softmax(logits, temperature), top_p)
    return int(torch.multinomial(probs, 1))  # BUG: generator ignored
