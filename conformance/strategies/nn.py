"""Hypothesis strategies for the nn spec items (functions returning strategies, keyword-only bounds, NamedTuples for composites)."""
