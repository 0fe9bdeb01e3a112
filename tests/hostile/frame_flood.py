"""Answers with a reply frame that is small on the wire and huge in the
judge: 800,000 empty arrays (about 50 MB of MessagePack, several GB once
built). The judge counts a frame's values before it builds them: a protocol
violation of run_silu's calls only, the judge unharmed."""

import numpy as np

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "replies with 800,000 empty arrays", "spec": ["2.silu", "2.linear"]}


def run_silu(in_features):
    empty = np.empty(0, dtype=np.float32)
    return [empty] * 800_000
