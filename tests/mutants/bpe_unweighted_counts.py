"""MUTANT: pair counts not weighted by pre-token frequency."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import count_file_pretokens, train_bpe_from_counts

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": ("each distinct pre-token counted once: pair counts ignore how often the pre-token occurs"),
    "run": ["1.2.train_bpe"],
    "hinted": ["pair counts not weighted by pre-token frequency"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    counts = count_file_pretokens(input_path, special_tokens)
    return train_bpe_from_counts(dict.fromkeys(counts, 1), vocab_size, special_tokens)
