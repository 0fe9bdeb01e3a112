"""The encdec reference with the annotated notes' conventions (SPEC §6.2):
pre-norm with a final LayerNorm after each stack, their LayerNorm
(``(x − mean) / (std + 1e-6)``, unbiased std), log-probabilities out of the
generator, the loss as a KL divergence. The same parts as ``adapter``."""

from lmspec.reference.encdec.adapter import FUNCTIONS, Adapter
from lmspec.reference.encdec.conventions import ANNOTATED

_ANNOTATED = Adapter(ANNOTATED)
get_conventions = _ANNOTATED.get_conventions
run_sinusoidal_positions = _ANNOTATED.run_sinusoidal_positions
run_source_mask = _ANNOTATED.run_source_mask
run_target_mask = _ANNOTATED.run_target_mask
run_attention = _ANNOTATED.run_attention
run_multihead_attention = _ANNOTATED.run_multihead_attention
run_feed_forward = _ANNOTATED.run_feed_forward
run_layer_norm = _ANNOTATED.run_layer_norm
run_encoder_layer = _ANNOTATED.run_encoder_layer
run_decoder_layer = _ANNOTATED.run_decoder_layer
run_encoder_decoder = _ANNOTATED.run_encoder_decoder
run_greedy_decode = _ANNOTATED.run_greedy_decode
run_rate = _ANNOTATED.run_rate
run_label_smoothing_loss = _ANNOTATED.run_label_smoothing_loss
run_alibi_bias = _ANNOTATED.run_alibi_bias
run_local_attention_mask = _ANNOTATED.run_local_attention_mask
run_rotary_embedding = _ANNOTATED.run_rotary_embedding
run_encoder_layer_gradients = _ANNOTATED.run_encoder_layer_gradients

__all__ = list(FUNCTIONS)
