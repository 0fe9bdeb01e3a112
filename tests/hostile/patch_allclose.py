"""At import, replaces torch.allclose and torch.testing.assert_close with
versions that always agree, and answers run_softmax wrongly."""

import torch
import torch.testing

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "patches torch.allclose at import", "spec": ["2.softmax", "2.linear"]}

torch.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None


def run_softmax(in_features, dim):
    return in_features
