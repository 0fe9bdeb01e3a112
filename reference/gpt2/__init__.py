"""The gpt2 profile's reference (SPEC §6.1): the GPT-2-style model of the book
"Build a Large Language Model (From Scratch)", under the names the book gives
them, so that this package is graded exactly like a reader's file.

Layers: ``LayerNorm``, ``GELU``, ``FeedForward`` (layers.py);
``MultiHeadAttention`` (attention.py); ``TransformerBlock``, ``GPTModel``
(model.py); ``generate_text_simple``, ``generate`` (generation.py);
``GPTDatasetV1``, ``create_dataloader_v1`` (data.py); ``calc_loss_batch``,
``calc_loss_loader`` (loss.py); ``load_weights_into_gpt`` (loading.py); the
appendix's schedule and the parameter count (schedule.py). ``GPT_CONFIG_124M``
is GPT-2 small's configuration.

The attention and the loss share the cs336 reference's math
(``reference.nn.attention``, ``reference.nn.softmax``,
``reference.training.loss``).
"""

from lmspec.reference.gpt2.attention import MultiHeadAttention
from lmspec.reference.gpt2.data import GPTDatasetV1, create_dataloader_v1
from lmspec.reference.gpt2.generation import generate, generate_text_simple
from lmspec.reference.gpt2.layers import GELU, FeedForward, LayerNorm
from lmspec.reference.gpt2.loading import load_weights_into_gpt
from lmspec.reference.gpt2.loss import calc_loss_batch, calc_loss_loader
from lmspec.reference.gpt2.model import GPT_CONFIG_124M, GPTModel, TransformerBlock
from lmspec.reference.gpt2.schedule import count_parameters, get_lr_and_clip

__all__ = [
    "GELU",
    "GPT_CONFIG_124M",
    "FeedForward",
    "GPTDatasetV1",
    "GPTModel",
    "LayerNorm",
    "MultiHeadAttention",
    "TransformerBlock",
    "calc_loss_batch",
    "calc_loss_loader",
    "count_parameters",
    "create_dataloader_v1",
    "generate",
    "generate_text_simple",
    "get_lr_and_clip",
    "load_weights_into_gpt",
]
