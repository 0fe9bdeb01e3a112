"""MUTANT (encdec): decoding stops when end_id is predicted without appending it."""

import torch

from lmspec.reference.encdec import adapter as _adapter
from lmspec.reference.encdec.adapter import *  # noqa: F403
from lmspec.reference.encdec.layers import causal_mask


@torch.no_grad()
def _greedy(model, src, src_mask, max_len, start_id, end_id=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
    ended = torch.zeros(src.shape[0], dtype=torch.bool)
    while ys.shape[1] < max_len:
        hidden = model.decode(memory, src_mask, ys, causal_mask(ys.shape[1]))
        nxt = model.generate(hidden[:, -1]).argmax(-1)
        if end_id is not None:
            ended |= nxt == end_id
            if bool(ended.all()):
                break
            nxt = nxt.masked_fill(ended, end_id)
        ys = torch.cat([ys, nxt.unsqueeze(-1)], dim=-1)
    return ys


_adapter.greedy_decode = _greedy

MUTANT = {
    "spec": "encdec.greedy",
    "bug": "decoding stops when end_id is predicted without appending it",
    "run": ["encdec.greedy"],
    "profile": "encdec",
    "hinted": ["stops when every row has predicted end_id without appending it"],
}
