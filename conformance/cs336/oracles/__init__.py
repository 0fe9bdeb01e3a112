"""Shared oracles, one module per spec area (nn, tokenizer, training); import
from the area module, e.g. `from conformance.oracles.nn import ...`."""
