"""Answers with a reply frame of 50,000 empty arrays, two and a half times
the 20,000 tensors and arrays a frame may hold (protocol.MAX_ARRAYS): small
on the wire, and every one of them an object the judge would build. The
judge counts a frame's values as it reads them and stops at the limit: a
protocol violation of run_silu's calls only, the judge unharmed. (800,000,
as this case once sent, proved nothing more and cost the worker about 20 s
of encoding per call.)"""

import numpy as np

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "replies with 50,000 empty arrays", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    empty = np.empty(0, dtype=np.float32)
    return [empty] * 50_000
