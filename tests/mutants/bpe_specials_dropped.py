"""MUTANT: special tokens deleted from the corpus, joining their neighbours."""

from pathlib import Path

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import count_pretokens, train_bpe_from_counts

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": ("special tokens removed with str.replace, so 'x<|endoftext|>y' trains as 'xy' (merges across them)"),
    "run": ["1.2.train_bpe"],
    "hinted": ["special tokens deleted and their neighbours joined"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    text = Path(input_path).read_text(encoding="utf-8")
    for s in special_tokens:
        text = text.replace(s, "")
    return train_bpe_from_counts(count_pretokens(text, ()), vocab_size, special_tokens)
