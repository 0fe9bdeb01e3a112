"""MUTANT (encdec): the checkpointed encoder layer is fed a detached input, so no gradient reaches in_features."""

import torch
import torch.utils.checkpoint

from lmspec.reference.encdec import adapter as _adapter
from lmspec.reference.encdec.adapter import *  # noqa: F403
from lmspec.reference.encdec.model import EncoderLayer


def run_encoder_layer_gradients(d_model, num_heads, d_ff, weights, in_features, src_mask, grad_output, checkpoint):
    layer = _adapter._loaded(EncoderLayer(d_model, num_heads, d_ff), weights)
    x = in_features.detach().clone().requires_grad_(True)
    if checkpoint:
        out = torch.utils.checkpoint.checkpoint(layer, x.detach(), src_mask, use_reentrant=False)
    else:
        out = layer(x, src_mask)
    out.backward(grad_output)
    params = dict(layer.named_parameters())
    grads = {name: params[name].grad for name in weights}
    grads["in_features"] = x.grad
    return out.detach(), grads


MUTANT = {
    "spec": "encdec.checkpointing",
    "bug": "checkpointed layer fed a detached input: no gradient w.r.t. in_features",
    "run": ["encdec.checkpointing"],
    "profile": "encdec",
    "hinted": ["the checkpointed layer's input detached"],
}
