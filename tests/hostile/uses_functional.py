"""run_softmax and run_silu use torch.nn.functional (correct answers, but not
from scratch: SPEC §0)."""

import torch.nn.functional as F

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {
    "does": "uses torch.nn.functional.softmax and silu",
    "spec": ["0.from_scratch", "2.linear"],
}


def run_softmax(in_features, dim):
    return F.softmax(in_features, dim=dim)


def run_silu(in_features):
    return F.silu(in_features)
