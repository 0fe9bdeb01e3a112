"""VARIANT: BPE training that numbers the special tokens first (ids 0..k-1),
then the 256 bytes (k..k+255), then merges in order. SPEC §1.2 leaves the ids
of bytes and specials to the implementation; the tokenizer is the reference's,
which takes any vocabulary."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_train_bpe as _reference_train

VARIANT = {"what": "special tokens get ids 0.., bytes after them", "run": ["1"]}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    vocab, merges = _reference_train(input_path, vocab_size, special_tokens, **kwargs)
    specials = [s.encode("utf-8") for s in dict.fromkeys(special_tokens)]
    byte_tokens = [bytes([b]) for b in range(256)]
    merged = [vocab[i] for i in sorted(vocab)][256 + len(specials) :]
    return dict(enumerate(specials + byte_tokens + merged)), merges
