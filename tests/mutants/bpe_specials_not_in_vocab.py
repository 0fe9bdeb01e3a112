"""MUTANT: the trained vocabulary leaves the special tokens out."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_train_bpe as _reference_train

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": "special tokens missing from the returned vocab (ids renumbered 0..len-1 without them)",
    "run": ["1.2.train_bpe"],
    "hinted": ["special tokens left out of the returned vocab"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    vocab, merges = _reference_train(input_path, vocab_size, special_tokens, **kwargs)
    specials = {s.encode("utf-8") for s in special_tokens}
    kept = [vocab[i] for i in sorted(vocab) if vocab[i] not in specials]
    return dict(enumerate(kept)), merges
