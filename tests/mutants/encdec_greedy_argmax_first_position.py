"""MUTANT (encdec): argmax of the first position instead of the last."""

import torch

from lmspec.reference.encdec import adapter as _adapter
from lmspec.reference.encdec.adapter import *  # noqa: F403
from lmspec.reference.encdec.layers import causal_mask


@torch.no_grad()
def _greedy(model, src, src_mask, max_len, start_id, end_id=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
    while ys.shape[1] < max_len:
        hidden = model.decode(memory, src_mask, ys, causal_mask(ys.shape[1]))
        ys = torch.cat([ys, model.generate(hidden[:, 0]).argmax(-1, keepdim=True)], dim=-1)
    return ys


_adapter.greedy_decode = _greedy

MUTANT = {
    "spec": "encdec.greedy",
    "bug": "argmax of the first position instead of the last",
    "run": ["encdec.greedy"],
    "profile": "encdec",
    "hinted": ["argmax at the first position instead of the last"],
}
