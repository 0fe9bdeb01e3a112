"""Recurring jaxtyping aliases (SPEC §2 axis names)."""

import os

import numpy as np
import numpy.typing as npt
from jaxtyping import Bool, Float, Int
from torch import Tensor

PathLike = str | os.PathLike
Tokens = Int[Tensor, "... seq"]
Activations = Float[Tensor, "... seq d_model"]
Logits = Float[Tensor, "... vocab_size"]
Mask = Bool[Tensor, "... queries keys"]
TokenArray = npt.NDArray[np.integer]

__all__ = ["Activations", "Bool", "Float", "Int", "Logits", "Mask", "PathLike", "TokenArray", "Tokens"]
