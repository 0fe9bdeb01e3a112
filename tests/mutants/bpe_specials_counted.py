"""MUTANT: special tokens pre-tokenized and counted as ordinary text during training."""

from pathlib import Path

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import count_pretokens, train_bpe_from_counts

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": ("corpus not split on special tokens before pre-tokenization: '<|', 'endoftext', '|>' get merged"),
    "run": ["1.2.train_bpe"],
    "hinted": ["special tokens were pre-tokenized and counted as ordinary text"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    text = Path(input_path).read_text(encoding="utf-8")
    return train_bpe_from_counts(count_pretokens(text, ()), vocab_size, special_tokens)
