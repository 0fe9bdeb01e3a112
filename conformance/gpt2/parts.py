"""The gpt2 implementation's own parts with the oracle parts' signatures
(oracles.Parts), so that a TransformerBlock or GPTModel failure that its
failing LayerNorm, MultiHeadAttention or FeedForward explains says so
(hints.part_hints; the cs336 twin: conformance/cs336/parts.py). A part is
called in eval mode with float32 inputs and read back as float64; a missing
or failing one makes its swap raise (no hint)."""

from collections.abc import Callable, Mapping
from typing import Any

import torch

from lmspec.conformance.judge.remote import RemoteFunction

#: A composite's item -> (the part's item, its name in oracles.Parts), innermost first.
SWAPS: dict[str, tuple[tuple[str, str], ...]] = {
    "gpt2.block": (("gpt2.layernorm", "layernorm"), ("gpt2.feedforward", "feedforward"), ("gpt2.mha", "mha")),
    "gpt2.model": (
        ("gpt2.layernorm", "layernorm"),
        ("gpt2.feedforward", "feedforward"),
        ("gpt2.mha", "mha"),
        ("gpt2.block", "block"),  # outermost: a part inside it comes first
    ),
}


class GPT2Parts:
    """The parts of one implementation, for one config ``cfg``."""

    def __init__(self, impl: Any, cfg: Mapping[str, Any]) -> None:
        self.impl, self.cfg = impl, dict(cfg)

    def _call(self, name: str, **kwargs: Any) -> torch.Tensor:
        if self.impl is None or not self.impl.has(name):
            raise LookupError(f"{name} is not implemented")
        kwargs = {
            k: (v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in kwargs.items()
        }
        if isinstance(kwargs.get("weights"), dict):
            kwargs["weights"] = {k: v.float() for k, v in kwargs["weights"].items()}
        with self.impl.repeats.paused():
            out = RemoteFunction(self.impl, name)(**kwargs)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{name} returned {type(out).__name__}")
        return out.detach().to("cpu", torch.float64)

    def layernorm(self, x, w):
        return self._call("gpt2_layernorm", emb_dim=x.shape[-1], weights=dict(w), in_features=x)

    def feedforward(self, x, w):
        return self._call("gpt2_feedforward", cfg=self.cfg, weights=dict(w), in_features=x)

    def mha(self, x, w, heads):
        c = self.cfg
        return self._call(
            "gpt2_mha",
            d_in=x.shape[-1],
            d_out=x.shape[-1],
            context_length=c["context_length"],
            dropout=c["drop_rate"],
            num_heads=heads,
            qkv_bias=c["qkv_bias"],
            weights=dict(w),
            in_features=x,
        )

    def block(self, x, w, heads):
        return self._call("gpt2_block", cfg=self.cfg, weights=dict(w), in_features=x)


def swaps(impl: Any, cfg: Mapping[str, Any], composite: str, run: Callable[..., Any]) -> list[tuple[str, Any]]:
    """(part's item, thunk) pairs: each thunk is ``run(parts={name: the
    implementation's part})``, for hints.part_hints."""
    parts = GPT2Parts(impl, cfg)
    return [(item, lambda n=name: run(parts={n: getattr(parts, n)})) for item, name in SWAPS[composite]]
