"""The implementation's own parts, callable with the oracle parts' signatures
(conformance/cs336/oracles/nn.py ``Parts``), so that a composite's failure can
be put down to a failing part: the oracle's block with the implementation's
RMSNorm swapped in reproduces the implementation's block, on the failing
input and on the second, and the block's failure says ``explained by
2.rmsnorm (fix that first)`` (hints.part_hints).

A part is called as the official tests call its adapter function, with
float32 inputs on the test's device, and its output read back as float64;
a missing function, or one that raises, makes its swap raise (a hint that
cannot be computed is not shown). Its failures are not counted towards the
repeated-failure limit: the test handles them.
"""

from collections.abc import Callable, Sequence
from typing import Any

import torch

from lmspec.conformance.judge.remote import RemoteFunction

F32 = torch.float32

#: A composite's item -> its parts that may explain its failure, innermost
#: first: (the part's item, the oracle's name for it in ``nn.Parts``). Read by
#: the tests (:meth:`ImplParts.of`) and by docs/known-bugs.md.
SWAPS: dict[str, tuple[tuple[str, str], ...]] = {
    "2.sdpa": (("2.softmax", "softmax"),),
    "2.mha": (("2.sdpa", "sdpa"), ("2.rope", "rope")),
    "2.block": (("2.rmsnorm", "rmsnorm"), ("2.swiglu", "ffn"), ("2.mha", "mha")),
    "2.lm": (
        ("2.embedding", "embedding"),
        ("2.rmsnorm", "rmsnorm"),
        ("2.swiglu", "ffn"),
        ("2.mha", "mha"),
        ("2.linear", "lm_head"),
        ("2.block", "block"),  # outermost: a part inside it comes first
    ),
}


class ImplParts:
    """The parts of one implementation, on one device (``impl`` None: none;
    a self-test's composite without parts)."""

    def __init__(self, impl: Any, device: str) -> None:
        self.impl, self.device = impl, device

    def _call(self, name: str, *args: Any) -> torch.Tensor:
        if self.impl is None or not self.impl.has(name):
            raise LookupError(f"{name} is not implemented")
        moved = [a.to(self.device, F32) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        moved = [a.to(self.device) if isinstance(a, torch.Tensor) else a for a in moved]
        moved = [{k: v.to(self.device, F32) for k, v in a.items()} if isinstance(a, dict) else a for a in moved]
        with self.impl.repeats.paused():
            out = RemoteFunction(self.impl, name)(*moved)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{name} returned {type(out).__name__}")
        return out.detach().to("cpu", torch.float64)

    def of(
        self, composite: str, *, max_seq_len: int = 0, d_ff: int = 0, rope: bool = True
    ) -> list[tuple[str, str, Callable[..., torch.Tensor]]]:
        """(item, oracle part name, the implementation's callable) for each
        part of ``composite`` (SWAPS); ``rope=False``: an MHA without RoPE."""
        made = {
            "softmax": lambda: self.softmax,
            "sdpa": lambda: self.sdpa,
            "rope": lambda: self.rope(max_seq_len),
            "rmsnorm": lambda: self.rmsnorm,
            "ffn": lambda: self.ffn,
            "mha": lambda: self.mha(max_seq_len),
            "embedding": lambda: self.embedding,
            "lm_head": lambda: self.lm_head,
            "block": lambda: self.block(max_seq_len, d_ff),
        }
        return [(item, name, made[name]()) for item, name in SWAPS[composite] if rope or name != "rope"]

    # --- one callable per oracle part (nn.Parts) ----------------------------------------
    def rmsnorm(self, x, weight, eps):
        return self._call("run_rmsnorm", x.shape[-1], eps, weight, x)

    def ffn(self, x, w1, w2, w3):
        return self._call("run_swiglu", x.shape[-1], w1.shape[0], w1, w2, w3, x)

    def mha(self, max_seq_len: int) -> Callable[..., torch.Tensor]:
        def run(x, q_w, k_w, v_w, o_w, num_heads, theta=None, positions=None):
            w = (q_w, k_w, v_w, o_w)
            if theta is None:
                return self._call("run_multihead_self_attention", x.shape[-1], num_heads, *w, x)
            if positions is None:
                positions = torch.arange(x.shape[-2]).expand(x.shape[:-1])
            return self._call(
                "run_multihead_self_attention_with_rope", x.shape[-1], num_heads, max_seq_len, theta, *w, x, positions
            )

        return run

    def block(self, max_seq_len: int, d_ff: int) -> Callable[..., torch.Tensor]:
        def run(x, weights, num_heads, theta):
            return self._call("run_transformer_block", x.shape[-1], num_heads, d_ff, max_seq_len, theta, weights, x)

        return run

    def sdpa(self, q, k, v, mask):
        return self._call("run_scaled_dot_product_attention", q, k, v, mask)

    def rope(self, max_seq_len: int) -> Callable[..., torch.Tensor]:
        def run(x, positions, theta):
            return self._call("run_rope", x.shape[-1], theta, max_seq_len, x, positions)

        return run

    def softmax(self, x, dim):
        return self._call("run_softmax", x, dim)

    def embedding(self, weight, ids):
        return self._call("run_embedding", weight.shape[0], weight.shape[1], weight, ids)

    def lm_head(self, x, weight):
        return self._call("run_linear", weight.shape[1], weight.shape[0], weight, x)


def swaps(composite: Callable[..., Any], parts: Sequence[tuple[str, str, Any]]) -> list[tuple[str, Callable[[], Any]]]:
    """(item, thunk) pairs for hints.part_hints: ``parts`` are (item, part
    name, the implementation's callable), innermost first; each thunk runs
    ``composite(parts={name: callable})``."""
    return [(item, lambda n=name, f=fn: composite(parts={n: f})) for item, name, fn in parts]
