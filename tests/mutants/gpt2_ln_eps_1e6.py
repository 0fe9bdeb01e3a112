"""MUTANT (gpt2): Eps 1e-6 instead of the book's 1e-5."""

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import LayerNorm as _LayerNorm

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.layernorm",
    "bug": "eps 1e-6 instead of the book's 1e-5",
    "run": ["gpt2.layernorm"],
    "hinted": ["eps 1e-6 instead of the book's 1e-5"],
    "strict_only": (
        "SPEC §6.1: MUST rows have a standard deviation of at least 0.5, where eps 1e-6 and 1e-5 agree within "
        "tolerance; near-constant rows, which tell them apart, are STRICT"
    ),
}


class LayerNorm(_LayerNorm):
    def __init__(self, emb_dim):
        super().__init__(emb_dim, eps=1e-6)
