"""VARIANT: the encdec reference with the annotated notes' conventions,
declared through get_conventions(): pre-norm with a final LayerNorm after each
stack, the annotated LayerNorm ((x − mean) / (unbiased std + 1e-6)),
log-probabilities out of the generator, the smoothed loss as a KL
divergence. The suite must follow the declaration and pass it in full."""

from lmspec.reference.encdec.adapter_annotated import *  # noqa: F403

VARIANT = {
    "what": "reference, annotated conventions (pre-norm, annotated LayerNorm, log-probs, KL)",
    "profile": "encdec",
}
