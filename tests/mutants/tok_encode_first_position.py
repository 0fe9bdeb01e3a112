"""MUTANT: encode merges the leftmost pair that is any merge, not the lowest-rank one."""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import Tokenizer

MUTANT = {
    "spec": "1.3.encode",
    "bug": "BPE at encode time applies the first applicable merge by position instead of by rank",
    "run": ["1.3.encode"],
    "hinted": ["merges applied at the leftmost position where any merge applies"],
}


class _Tokenizer(Tokenizer):
    def _encode_pretokens(self, pretokens, cache):
        out = []
        for pretoken in pretokens:
            ids = [self._byte_ids[b] for b in pretoken.encode("utf-8")]
            while True:
                at = next(
                    (i for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) in self._pair_ranks),
                    None,
                )
                if at is None:
                    break
                ids[at : at + 2] = [self._merged_ids[self._pair_ranks[(ids[at], ids[at + 1])]]]
            out += ids
        return out


def get_tokenizer(vocab, merges, special_tokens=None):
    return _Tokenizer(vocab, merges, special_tokens)
