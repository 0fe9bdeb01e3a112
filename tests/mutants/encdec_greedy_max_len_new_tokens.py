"""MUTANT (encdec): max_len new ids after start_id (one too many)."""

from lmspec.reference.encdec import adapter as _adapter
from lmspec.reference.encdec.adapter import *  # noqa: F403

_greedy = _adapter.greedy_decode


def _one_more(model, src, src_mask, max_len, start_id, end_id=None):
    return _greedy(model, src, src_mask, max_len + 1, start_id, end_id)


_adapter.greedy_decode = _one_more

MUTANT = {
    "spec": "encdec.greedy",
    "bug": "max_len new ids after start_id (one too many)",
    "run": ["encdec.greedy"],
    "profile": "encdec",
    "hinted": ["max_len counted without start_id"],
    "never_hinted": ["one id too few"],
}
