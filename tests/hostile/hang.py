"""run_softmax never returns (an endless Python loop)."""

from reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_softmax loops forever", "spec": ["2.softmax", "2.linear"]}


def run_softmax(in_features, dim):
    while True:
        pass
