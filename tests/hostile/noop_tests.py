"""At import, hunts for the suite's test functions (any module named like
conformance.test_*, in sys.modules or importable) and replaces them with
no-ops, then answers run_softmax wrongly. The suite never runs in the
submission's process, so there is nothing to neuter; the attempt to import
the suite is itself a finding."""

import sys

from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "replaces the suite's test functions with no-ops at import", "spec": ["2.softmax", "2.linear"]}


def _noop(*args, **kwargs):
    return None


def _neuter(module) -> None:
    for key, value in list(vars(module).items()):
        if key.startswith("test_") and callable(value):
            setattr(module, key, _noop)


for _name, _module in list(sys.modules.items()):
    if _name.startswith("conformance"):
        _neuter(_module)
try:
    import conformance.test_nn_ops as _suite

    _neuter(_suite)
except ImportError:
    pass


def run_softmax(in_features, dim):
    return in_features
