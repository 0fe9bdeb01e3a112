"""MUTANT: BPE training without GPT-2 pre-tokenization (pairs counted across pre-tokens)."""

from collections import Counter
from pathlib import Path

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import split_on_special_tokens, train_bpe_from_counts

MUTANT = {
    "spec": "1.1.pretokenize",
    "bug": ("each special-free segment is one word: merges span pre-token boundaries (e.g. 'a b' -> 'a', ' ')"),
    "run": ["1.1.pretokenize", "1.2.train_bpe"],
    "hinted": ["pairs counted across pre-token boundaries"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    text = Path(input_path).read_text(encoding="utf-8")
    counts = Counter(p for p, special in split_on_special_tokens(text, special_tokens) if not special)
    return train_bpe_from_counts(counts, vocab_size, special_tokens)
