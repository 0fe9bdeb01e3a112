"""run_softmax never returns (an endless Python loop); 2.softmax has over
ten tests that call it. One timeout kills the worker, and the function is
not called again in that grade."""

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "run_softmax loops forever", "spec": ["2.softmax", "2.linear"]}


def run_softmax(in_features, dim):
    while True:
        pass
