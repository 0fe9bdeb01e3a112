"""MUTANT: BPE ties broken by dict order (first pair seen), as max(stats, key=stats.get) does."""

import itertools
from collections import Counter

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import count_file_pretokens

MUTANT = {
    "spec": "1.2.train_bpe",
    "bug": ("most frequent pair picked with max(counts, key=counts.get): ties go to the first pair seen"),
    "run": ["1.2.train_bpe"],
    "hinted": ["ties broken by the order pairs were first counted"],
}


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    counts = count_file_pretokens(input_path, special_tokens)
    words = Counter({tuple(bytes([b]) for b in w.encode("utf-8")): n for w, n in counts.items()})
    vocab = {i: bytes([i]) for i in range(256)}
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    merges = []
    while len(vocab) < vocab_size:
        pairs = {}
        for w, n in words.items():
            for p in itertools.pairwise(w):
                pairs[p] = pairs.get(p, 0) + n
        if not pairs:
            break
        pair = max(pairs, key=pairs.get)  # BUG: tie-break by insertion order
        merges.append(pair)
        vocab[len(vocab)] = pair[0] + pair[1]
        new = Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += n
        words = new
    return vocab, merges
