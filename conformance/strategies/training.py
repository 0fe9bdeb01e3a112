"""Hypothesis strategies for the training spec items (functions returning strategies, keyword-only bounds, NamedTuples for composites)."""
