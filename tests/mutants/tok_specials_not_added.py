"""MUTANT: special tokens absent from the vocabulary are ignored instead of added."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.special_tokens",
    "bug": "only special tokens already in the vocab are honoured; absent ones stay ordinary text",
    "run": ["1.3.special_tokens"],
    "hinted": ["special tokens absent from the vocabulary are not added"],
}


def get_tokenizer(vocab, merges, special_tokens=None):
    present = set(vocab.values())
    kept = [s for s in special_tokens or () if s.encode("utf-8") in present]
    return Tokenizer(vocab, merges, kept)
