"""VARIANT: a student adapter that renames the state-dict keys to its own
module's names by popping them out of the ``weights`` dict it is given (so it
empties the caller's dict). Correct in every result it returns; it only
mutates its input, which SPEC §0 "Inputs are never shared" makes harmless:
the harness gives every call fresh copies of its arguments. Until it does,
a test that passes the same dict to two calls sees the second call fail.
The block and the LM run through the reference modules under the student's
key names; everything else comes from the reference adapter.
"""

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.adapter import run_transformer_block as _reference_block
from lmspec.reference.adapter import run_transformer_lm as _reference_lm

VARIANT = {"what": "adapter popping entries out of its weights dict (mutates its input)", "run": ["2.block", "2.lm"]}

_MINE = {"attn.": "attention.", "ffn.": "feed_forward.", "ln1.": "norm1.", "ln2.": "norm2."}


def _to_mine(weights):
    """Move every entry into a dict under this student's names (popping them)."""
    mine = {}
    for key in list(weights):
        new = key
        for theirs, ours in _MINE.items():
            new = new.replace(theirs, ours)
        mine[new] = weights.pop(key)
    return mine


def _to_spec(mine):
    out = {}
    for key, value in mine.items():
        for theirs, ours in _MINE.items():
            key = key.replace(ours, theirs)
        out[key] = value
    return out


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    mine = _to_mine(weights)
    return _reference_block(d_model, num_heads, d_ff, max_seq_len, theta, _to_spec(mine), in_features)


def run_transformer_lm(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights, in_indices
):
    mine = _to_mine(weights)
    return _reference_lm(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, _to_spec(mine), in_indices
    )
