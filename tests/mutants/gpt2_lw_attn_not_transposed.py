"""MUTANT (gpt2): Query/key/value matrices copied without .T (square, so no shape error)."""

import numpy as np
import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import load_weights_into_gpt as _load

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.load_weights",
    "bug": "query/key/value matrices copied without .T (square, so no shape error)",
    "run": ["gpt2.load_weights"],
    "hinted": ["not transposed into Linear"],
}


def load_weights_into_gpt(gpt, params):
    _load(gpt, params)
    for blk, src in zip(gpt.trf_blocks, params["blocks"]):
        ws = np.split(src["attn"]["c_attn"]["w"], 3, axis=-1)
        for lin, w in zip((blk.att.W_query, blk.att.W_key, blk.att.W_value), ws):
            with torch.no_grad():
                lin.weight.copy_(torch.tensor(w))
