"""Oracles for the tokenizer spec items: float64 formulas and torch/tiktoken built-ins, computed apart from the implementation under test."""
