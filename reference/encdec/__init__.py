"""The encoder–decoder Transformer of "Attention Is All You Need" (SPEC §6.2).

Parts: ``layers`` (masks, attention with n ≠ m, multi-head attention with
biases, the position-wise FFN, both LayerNorm variants, sinusoidal
positions), ``model`` (encoder and decoder layers in post- and pre-norm, the
full model, greedy decoding), ``training`` (the rate rule, both
label-smoothing variants, the teacher-forcing loss). ``conventions`` names
the choices the texts differ on; ``adapter`` exposes the parts through the
profile's adapter functions with the paper's choices, ``adapter_annotated``
with the annotated notes' (pre-norm, their LayerNorm, log-probabilities, KL).
"""

from lmspec.reference.encdec.conventions import ANNOTATED, PAPER, Conventions

__all__ = ["ANNOTATED", "PAPER", "Conventions"]
