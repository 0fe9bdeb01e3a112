"""MUTANT: a parallel trainer that, when there are no special tokens to cut
the file at, cuts it into four equal byte ranges and pre-tokenizes each on
its own: a pre-token that straddles a cut is counted as two.

Seen in a real repository (issue 19), where the failure was explained as
"the stopping test is off by one". A hint is named only when replaying its
bug reproduces the output on the failing input and on a second input of the
same test: this mutant must be killed with no such hint.
"""

import tempfile
from pathlib import Path

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_train_bpe as _reference_train

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": "no special tokens: the file cut into 4 byte ranges, pre-tokens straddling a cut split in two",
    "run": ["1.2.train_bpe", "1.1.pretokenize"],
    "never_hinted": ["the stopping test is off by one"],
}

_CUT = "\x00<|cut|>\x00"


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    if special_tokens:
        return _reference_train(input_path, vocab_size, special_tokens, **kwargs)
    data = Path(input_path).read_bytes()
    step = max(1, len(data) // 4)
    ranges = [data[i : i + step] for i in range(0, len(data), step)]
    text = _CUT.join(r.decode("utf-8", errors="ignore") for r in ranges)  # BUG: cuts inside pre-tokens
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ranges.txt"
        path.write_bytes(text.encode("utf-8"))
        vocab, merges = _reference_train(path, vocab_size + 1, [_CUT], **kwargs)
    cut_id = next(i for i, token in vocab.items() if token == _CUT.encode("utf-8"))
    kept = sorted(i for i in vocab if i != cut_id)
    return {new: vocab[old] for new, old in enumerate(kept)}, merges
