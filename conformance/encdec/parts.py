"""The encdec implementation's own parts with the oracle parts' signatures
(oracles.Parts), so that a failure of multi-head attention, of an encoder or
decoder layer or of the model that its failing attention, FFN, LayerNorm,
positions or layer explains says so: the oracle's composite (written out:
``oracles.mha_formula``, ``*_layer_formula``, ``Model(parts=...)``) with the
implementation's part swapped in reproduces the implementation's output, on
the failing input and on the second, and the failure says ``explained by
encdec.layernorm (fix that first)`` (hints.part_hints; the twins:
conformance/cs336/parts.py, conformance/gpt2/parts.py).

A part is called as the tests call its adapter function, with float32
inputs, and read back as float64; a missing or failing one makes its swap
raise (no hint). Its failures are not counted towards the repeated-failure
limit: the test handles them.
"""

from collections.abc import Callable
from typing import Any

import torch

from lmspec.conformance.judge.remote import RemoteFunction

#: A composite's item -> (the part's item, its name in oracles.Parts), innermost
#: first. Read by the tests (:func:`swaps`) and by docs/known-bugs.md.
SWAPS: dict[str, tuple[tuple[str, str], ...]] = {
    "encdec.mha": (("encdec.attention", "attention"),),
    "encdec.encoder_layer": (
        ("encdec.layernorm", "layernorm"),
        ("encdec.ffn", "ffn"),
        ("encdec.attention", "attention"),
        ("encdec.mha", "mha"),
    ),
    "encdec.decoder_layer": (
        ("encdec.layernorm", "layernorm"),
        ("encdec.ffn", "ffn"),
        ("encdec.attention", "attention"),
        ("encdec.mha", "mha"),
    ),
    "encdec.model": (
        ("encdec.positions", "positions"),
        ("encdec.layernorm", "layernorm"),
        ("encdec.ffn", "ffn"),
        ("encdec.attention", "attention"),
        ("encdec.mha", "mha"),
        ("encdec.encoder_layer", "encoder_layer"),  # outermost: a part inside them comes first
        ("encdec.decoder_layer", "decoder_layer"),
    ),
}


def _f32(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float32) if value.is_floating_point() else value.detach().cpu()
    if isinstance(value, dict):
        return {k: _f32(v) for k, v in value.items()}
    return value


class EncdecParts:
    """The parts of one implementation (``impl`` None: none)."""

    def __init__(self, impl: Any) -> None:
        self.impl = impl

    def _call(self, name: str, **kwargs: Any) -> torch.Tensor:
        if self.impl is None or not self.impl.has(name):
            raise LookupError(f"{name} is not implemented")
        with self.impl.repeats.paused():
            out = RemoteFunction(self.impl, name)(**{k: _f32(v) for k, v in kwargs.items()})
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{name} returned {type(out).__name__}")
        return out.detach().to("cpu", torch.float64)

    # --- one callable per oracle part (oracles.Parts) ---------------------------------------
    def attention(self, q, k, v, mask):
        return self._call("run_attention", Q=q, K=k, V=v, mask=mask)

    def mha(self, d_model, num_heads, weights, query, key, value, mask=None):
        return self._call(
            "run_multihead_attention",
            d_model=d_model,
            num_heads=num_heads,
            weights=dict(weights),
            query=query,
            key=key,
            value=value,
            mask=mask,
        )

    def ffn(self, weights, x, activation=None):
        fc1 = weights["fc1.weight"]
        return self._call(
            "run_feed_forward", d_model=fc1.shape[1], d_ff=fc1.shape[0], weights=dict(weights), in_features=x
        )

    def layernorm(self, x, weight, bias, variant=None):
        return self._call(
            "run_layer_norm", d_model=x.shape[-1], weights={"weight": weight, "bias": bias}, in_features=x
        )

    def positions(self, max_len, d_model):
        out = self._call("run_sinusoidal_positions", max_len=max_len, d_model=d_model)
        return out[0] if out.dim() == 3 and out.shape[0] == 1 else out

    def encoder_layer(self, d_model, num_heads, d_ff, weights, x, src_mask):
        return self._call(
            "run_encoder_layer",
            d_model=d_model,
            num_heads=num_heads,
            d_ff=d_ff,
            weights=dict(weights),
            in_features=x,
            src_mask=src_mask,
        )

    def decoder_layer(self, d_model, num_heads, d_ff, weights, x, memory, src_mask, tgt_mask):
        return self._call(
            "run_decoder_layer",
            d_model=d_model,
            num_heads=num_heads,
            d_ff=d_ff,
            weights=dict(weights),
            in_features=x,
            memory=memory,
            src_mask=src_mask,
            tgt_mask=tgt_mask,
        )


def swaps(impl: Any, composite: str, run: Callable[..., Any]) -> list[tuple[str, Callable[[], Any]]]:
    """(part's item, thunk) pairs for hints.part_hints: each thunk is
    ``run(parts={name: the implementation's part})``, innermost first."""
    parts = EncdecParts(impl)
    return [(item, lambda n=name: run(parts={n: getattr(parts, n)})) for item, name in SWAPS[composite]]
