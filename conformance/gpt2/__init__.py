"""The gpt2 profile's suite (SPEC §6.1): one test module per area, the float64
and ``transformers`` oracles (oracles.py) and the Hypothesis strategies
(strategies.py)."""
