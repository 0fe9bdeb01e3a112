"""MUTANT: vocab_size taken to count bytes and merges only (special tokens come on top)."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_train_bpe as _reference_train

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": ("len(vocab) ends at vocab_size + len(special_tokens): specials not counted in vocab_size"),
    "run": ["1.2.train_bpe"],
    "hinted": ["special tokens not counted in vocab_size"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    return _reference_train(input_path, vocab_size + len(special_tokens), special_tokens, **kwargs)
