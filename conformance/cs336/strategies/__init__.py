"""Shared strategies, one module per spec area (nn, tokenizer, training); import
from the area module, e.g. `from conformance.strategies.nn import ...`."""
