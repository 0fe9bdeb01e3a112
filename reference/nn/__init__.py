"""Transformer LM components of SPEC §2, one module per spec item.

Functional ops: ``silu``, ``softmax``, ``scaled_dot_product_attention``.
Modules: ``Linear``, ``Embedding``, ``RMSNorm``, ``SwiGLU``, ``SiLUFFN``,
``RotaryPositionalEmbedding``, ``CausalMultiHeadSelfAttention``,
``TransformerBlock``, ``TransformerLM`` (configured by ``ModelConfig``).
``load_weights`` loads CS336-style state dicts strictly.
"""

from lmspec.reference.nn.activations import silu
from lmspec.reference.nn.attention import CausalMultiHeadSelfAttention, scaled_dot_product_attention
from lmspec.reference.nn.block import FFN_KINDS, NORM_POSITIONS, TransformerBlock
from lmspec.reference.nn.embedding import Embedding
from lmspec.reference.nn.ffn import SiLUFFN, SwiGLU, default_d_ff
from lmspec.reference.nn.linear import Linear
from lmspec.reference.nn.lm import ModelConfig, TransformerLM
from lmspec.reference.nn.loading import load_weights
from lmspec.reference.nn.rmsnorm import RMSNorm
from lmspec.reference.nn.rope import RotaryPositionalEmbedding
from lmspec.reference.nn.softmax import softmax

__all__ = [
    "FFN_KINDS",
    "NORM_POSITIONS",
    "CausalMultiHeadSelfAttention",
    "Embedding",
    "Linear",
    "ModelConfig",
    "RMSNorm",
    "RotaryPositionalEmbedding",
    "SiLUFFN",
    "SwiGLU",
    "TransformerBlock",
    "TransformerLM",
    "default_d_ff",
    "load_weights",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
]
