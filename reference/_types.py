"""Recurring type aliases that need neither torch nor numpy (the tokenizer's)."""

import os

PathLike = str | os.PathLike

__all__ = ["PathLike"]
