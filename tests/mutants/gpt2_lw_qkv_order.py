"""MUTANT (gpt2): C_attn split read as key, query, value."""

import numpy as np
import torch

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import load_weights_into_gpt as _load

MUTANT = {
    "profile": "gpt2",
    "spec": "gpt2.load_weights",
    "bug": "c_attn split read as key, query, value",
    "run": ["gpt2.load_weights"],
    "hinted": ["c_attn split in the order (1, 0, 2)"],
}


def load_weights_into_gpt(gpt, params):
    _load(gpt, params)
    for blk, src in zip(gpt.trf_blocks, params["blocks"]):
        k, q, v = np.split(src["attn"]["c_attn"]["w"], 3, axis=-1)
        kb, qb, vb = np.split(src["attn"]["c_attn"]["b"], 3, axis=-1)
        for lin, w, b in ((blk.att.W_query, q, qb), (blk.att.W_key, k, kb), (blk.att.W_value, v, vb)):
            with torch.no_grad():
                lin.weight.copy_(torch.tensor(w.T))
                lin.bias.copy_(torch.tensor(b))
