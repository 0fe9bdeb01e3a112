"""Oracles for the training spec items: float64 formulas and torch/tiktoken built-ins, computed apart from the implementation under test."""
