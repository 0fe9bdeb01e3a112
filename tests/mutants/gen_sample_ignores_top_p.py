"""MUTANT: one sampling step that forgets the top-p filter."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.generation import temperature_softmax

MUTANT = {
    "spec": "4.generation",
    "bug": ("samples from softmax(v / tau) without top-p filtering: tokens outside the nucleus appear"),
    "run": ["4.generation"],
    "hinted": ["without the top-p filter"],
}


def run_sample_next_token(logits, temperature, top_p, generator):
    if temperature == 0:
        return int(logits.argmax())
    probs = temperature_softmax(logits, temperature)  # BUG: no top_p_filter
    return int(torch.multinomial(probs, 1, generator=generator))
