"""Hypothesis strategies for the tokenizer spec items (functions returning strategies, keyword-only bounds, NamedTuples for composites)."""
