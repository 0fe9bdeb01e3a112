"""Meta-tests: the suite rejects broken implementations and accepts correct
variants; the tools work end to end."""
