"""Loading the original GPT-2 checkpoint's parameters (SPEC §6.1 "load_weights_into_gpt").

``params`` is the layout of OpenAI's checkpoint as the book reads it:
``wte``, ``wpe``, ``g``, ``b`` and ``blocks[i]`` with ``attn.c_attn`` (Q, K, V
side by side on the last axis), ``attn.c_proj``, ``mlp.c_fc``, ``mlp.c_proj``
(each ``w`` of shape (in, out) and ``b``), ``ln_1``/``ln_2`` (``g``, ``b``).
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn


def _tensor(value: Any) -> torch.Tensor:
    return value.detach().clone() if isinstance(value, torch.Tensor) else torch.as_tensor(np.array(value))


def _assign(param: torch.Tensor, value: Any, name: str) -> None:
    new = _tensor(value)
    if tuple(param.shape) != tuple(new.shape):
        raise ValueError(f"{name}: shape {tuple(new.shape)} does not fit the model's {tuple(param.shape)}")
    with torch.no_grad():
        param.copy_(new.to(param.dtype))


def _linear(layer: nn.Linear, block: Mapping[str, Any], name: str) -> None:
    _assign(layer.weight, _tensor(block["w"]).T, f"{name}.w")
    _assign(layer.bias, block["b"], f"{name}.b")


def load_weights_into_gpt(gpt: nn.Module, params: Mapping[str, Any]) -> None:
    """Copy ``params`` into ``gpt`` in place (``w`` matrices transposed, the
    fused ``c_attn`` split into query, key and value); ``out_head`` gets
    ``wte``. A shape that does not fit raises ValueError naming it."""
    _assign(gpt.pos_emb.weight, params["wpe"], "wpe")
    _assign(gpt.tok_emb.weight, params["wte"], "wte")
    if len(params["blocks"]) != len(gpt.trf_blocks):
        raise ValueError(f"{len(params['blocks'])} blocks for a model of {len(gpt.trf_blocks)}")
    for i, (block, src) in enumerate(zip(gpt.trf_blocks, params["blocks"], strict=True)):
        where = f"blocks[{i}]"
        attn = src["attn"]
        w_q, w_k, w_v = np.split(np.asarray(_tensor(attn["c_attn"]["w"])), 3, axis=-1)
        b_q, b_k, b_v = np.split(np.asarray(_tensor(attn["c_attn"]["b"])), 3, axis=-1)
        for layer, w, b in ((block.att.W_query, w_q, b_q), (block.att.W_key, w_k, b_k), (block.att.W_value, w_v, b_v)):
            _assign(layer.weight, w.T, f"{where}.attn.c_attn.w")
            if layer.bias is not None:
                _assign(layer.bias, b, f"{where}.attn.c_attn.b")
        _linear(block.att.out_proj, attn["c_proj"], f"{where}.attn.c_proj")
        _linear(block.ff.layers[0], src["mlp"]["c_fc"], f"{where}.mlp.c_fc")
        _linear(block.ff.layers[2], src["mlp"]["c_proj"], f"{where}.mlp.c_proj")
        for norm, key in ((block.norm1, "ln_1"), (block.norm2, "ln_2")):
            _assign(norm.scale, src[key]["g"], f"{where}.{key}.g")
            _assign(norm.shift, src[key]["b"], f"{where}.{key}.b")
    _assign(gpt.final_norm.scale, params["g"], "g")
    _assign(gpt.final_norm.shift, params["b"], "b")
    _assign(gpt.out_head.weight, params["wte"], "wte (out_head)")
