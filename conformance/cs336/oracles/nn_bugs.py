"""The known bugs of SPEC §2's items (the Transformer LM), replayed on the
float64 oracles of ``nn.py``: one registry, ``KNOWN_BUGS``, read by the tests
of conformance/cs336 (test_nn_ops, test_rope, test_attention, test_model).

A replay takes the inputs the item's oracle takes and returns what the bug
gives (most are the oracles' ``bug=`` switches); a test names its cause only
when the replay reproduces the implementation's output on the failing input
and on the test's second input (conformance/hints.py, ``assert_close(...,
hints=KNOWN_BUGS.thunks(item, ...), again=...)``).
"""

from lmspec.conformance.cs336.oracles import nn as oracle
from lmspec.conformance.hints import KnownBugs

KNOWN_BUGS = KnownBugs()


# --- Linear, Embedding, RMSNorm, SiLU, SwiGLU, softmax ---------------------------


# --- RoPE ----------------------------------------------------------------------------


# --- attention and multi-head self-attention ------------------------------------------


# --- the block and the LM -------------------------------------------------------------
