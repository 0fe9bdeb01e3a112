"""MUTANT: a merge replaces occurrences scanning right to left ("aaa" -> a|aa)."""

import itertools
from collections import Counter

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import count_file_pretokens

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": ("merge applied right to left, so overlapping occurrences (aaa) merge as a|aa instead of aa|a"),
    "run": ["1.2.train_bpe"],
    "hinted": ["a merge replaces occurrences right to left"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    counts = count_file_pretokens(input_path, special_tokens)
    words = Counter({tuple(bytes([b]) for b in w.encode("utf-8")): n for w, n in counts.items()})
    vocab = {i: bytes([i]) for i in range(256)}
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    merges = []
    while len(vocab) < vocab_size:
        pairs = Counter()
        for w, n in words.items():
            for p in itertools.pairwise(w):
                pairs[p] += n
        if not pairs:
            break
        pair = max((n, p) for p, n in pairs.items())[1]
        merges.append(pair)
        vocab[len(vocab)] = pair[0] + pair[1]
        new = Counter()
        for w, n in words.items():
            out, i = [], len(w) - 1
            while i >= 0:  # BUG: scans from the right
                if i >= 1 and (w[i - 1], w[i]) == pair:
                    out.append(w[i - 1] + w[i])
                    i -= 2
                else:
                    out.append(w[i])
                    i -= 1
            new[tuple(reversed(out))] += n
        words = new
    return vocab, merges
