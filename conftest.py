# Root conftest: loads the lmspec pytest plugin (adapter selection, spec
# markers, Hypothesis profiles) for both conformance/ and tests/.
pytest_plugins = ["conformance.plugin"]
