"""One small, valid call of every adapter function (the official shapes,
tiny sizes), for the checks that need the function to run rather than to be
right: the from-scratch audit (test_audit.py) and the STRICT rule that a
function leaves its arguments unchanged (test_inputs.py).

``CALLS[name](fn, tmp_path, other)`` makes the call(s) and returns the
result of the main one (``other(name)`` gives another adapter function, e.g.
load_checkpoint reads what the implementation's own save_checkpoint wrote);
every argument is built fresh each time.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

Other = Callable[[str], Callable[..., Any]]
Recipe = Callable[[Callable[..., Any], Path, Other], Any]
D, H, DFF, V, T = 8, 2, 16, 16, 4
LM_ARGS = {
    "vocab_size": V,
    "context_length": T,
    "d_model": D,
    "num_layers": 1,
    "num_heads": H,
    "d_ff": DFF,
    "rope_theta": 10000.0,
}


def w(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))) * 0.3


def block_weights(prefix: str = "") -> dict[str, torch.Tensor]:
    out = {f"attn.{n}_proj.weight": w(D, D) for n in ("q", "k", "v")}
    out |= {"attn.output_proj.weight": w(D, D), "ln1.weight": torch.ones(D), "ln2.weight": torch.ones(D)}
    out |= {"ffn.w1.weight": w(DFF, D), "ffn.w2.weight": w(D, DFF), "ffn.w3.weight": w(DFF, D)}
    return {prefix + k: v for k, v in out.items()}


def lm_weights() -> dict[str, torch.Tensor]:
    return block_weights("layers.0.") | {
        "token_embeddings.weight": w(V, D),
        "ln_final.weight": torch.ones(D),
        "lm_head.weight": w(V, D),
    }


def x() -> torch.Tensor:
    return w(1, T, D)


def positions() -> torch.Tensor:
    return torch.arange(T)[None]


def ids() -> torch.Tensor:
    return torch.tensor([[1, 2, 3, 4]])


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))


class PlainSGD(torch.optim.Optimizer):
    """The suite's own optimizer for the checkpoint calls: only the base
    class's methods reach the implementation (torch.optim.SGD's own
    __setstate__ would count against the load_checkpoint that calls it)."""

    def __init__(self, params: Any) -> None:
        super().__init__(params, {"lr": 0.1})

    def step(self, closure: Any = None) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.data -= group["lr"] * p.grad
                    self.state[p]["steps"] = self.state[p].get("steps", 0) + 1


def _plain_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    opt = PlainSGD(model.parameters())
    model.w.grad = torch.ones(3)
    opt.step()
    return opt


def _adamw(fn: Callable, tmp: Path, other: Other) -> Any:
    cls = fn()
    p = torch.nn.Parameter(torch.ones(3))
    opt = cls([p], lr=1e-3, weight_decay=0.01)
    p.grad = torch.ones(3)
    opt.step()
    return cls


def _save(fn: Callable, tmp: Path, other: Other) -> Any:
    model = Tiny()
    return fn(model, _plain_optimizer(model), 3, tmp / "ckpt.pt")


def _load(fn: Callable, tmp: Path, other: Other) -> Any:
    model = Tiny()
    opt = _plain_optimizer(model)
    path = tmp / "ckpt-load.pt"
    other("run_save_checkpoint")(model, opt, 3, path)
    return fn(path, model, opt)


def tiny_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"ll", 258: b"<|endoftext|>"}
    return vocab, [(b"h", b"e"), (b"l", b"l")]


def _tokenizer(fn: Callable, tmp: Path, other: Other) -> Any:
    vocab, merges = tiny_vocab()
    tok = fn(vocab, merges, ["<|endoftext|>"])
    encoded = tok.encode("hello world<|endoftext|>")
    tok.decode(list(encoded))
    list(tok.encode_iterable(["hello ", "world"]))
    return tok


def _train_bpe(fn: Callable, tmp: Path, other: Other) -> Any:
    path = tmp / "corpus.txt"
    path.write_text("low low lower newest widest<|endoftext|>low lower\n" * 5)
    return fn(path, 262, ["<|endoftext|>"])


def _call(*make: Callable[[], Any], **kw_make: Callable[[], Any]) -> Recipe:
    """A recipe calling the function with freshly made arguments."""

    def run(fn: Callable, tmp: Path, other: Other) -> Any:
        return fn(*(m() for m in make), **{k: m() for k, m in kw_make.items()})

    return run


def _const(value: Any) -> Callable[[], Any]:
    return lambda: value


def _params_with_grad() -> tuple[torch.nn.Parameter, ...]:
    ps = (torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2, 2)))
    for p in ps:
        p.grad = torch.full_like(p, 3.0)
    return ps


_c = _const
CALLS: dict[str, Recipe] = {
    "run_linear": _call(_c(D), _c(3), lambda: w(3, D), x),
    "run_embedding": _call(_c(V), _c(D), lambda: w(V, D), ids),
    "run_swiglu": _call(_c(D), _c(DFF), lambda: w(DFF, D), lambda: w(D, DFF), lambda: w(DFF, D), x),
    "run_scaled_dot_product_attention": _call(x, x, x, lambda: torch.ones(1, T, T, dtype=torch.bool).tril()),
    "run_multihead_self_attention": _call(_c(D), _c(H), *(lambda: w(D, D),) * 4, x),
    "run_multihead_self_attention_with_rope": _call(
        _c(D), _c(H), _c(T), _c(10000.0), *(lambda: w(D, D),) * 4, x, positions
    ),
    "run_rope": _call(_c(D // H), _c(10000.0), _c(T), lambda: w(1, T, D // H), positions),
    "run_transformer_block": _call(_c(D), _c(H), _c(DFF), _c(T), _c(10000.0), block_weights, x),
    "run_transformer_lm": _call(**{k: _c(v) for k, v in LM_ARGS.items()}, weights=lm_weights, in_indices=ids),
    "run_rmsnorm": _call(_c(D), _c(1e-5), lambda: torch.ones(D), x),
    "run_silu": _call(x),
    "run_get_batch": _call(lambda: np.arange(50, dtype=np.int64), _c(2), _c(T), _c("cpu")),
    "run_softmax": _call(x, _c(-1)),
    "run_cross_entropy": _call(lambda: w(3, V), lambda: torch.tensor([1, 2, 3])),
    "run_gradient_clipping": _call(_params_with_grad, _c(0.01)),
    "get_adamw_cls": _adamw,
    "run_get_lr_cosine_schedule": _call(_c(5), _c(1.0), _c(0.1), _c(7), _c(21)),
    "run_save_checkpoint": _save,
    "run_load_checkpoint": _load,
    "get_tokenizer": _tokenizer,
    "run_train_bpe": _train_bpe,
    "run_silu_ffn": _call(_c(D), _c(4 * D), lambda: w(4 * D, D), lambda: w(D, 4 * D), x),
    "run_transformer_block_ablation": _call(
        _c(D), _c(H), _c(DFF), _c(T), _c(10000.0), block_weights, x, norm=_c("pre")
    ),
    "run_transformer_lm_ablation": _call(
        **{k: _c(v) for k, v in LM_ARGS.items()}, weights=lm_weights, in_indices=ids, norm=_c("pre")
    ),
    "run_count_parameters": _call(*(_c(v) for k, v in LM_ARGS.items() if k != "rope_theta")),
    "run_forward_flops": _call(*(_c(v) for k, v in LM_ARGS.items() if k != "rope_theta")),
    "run_perplexity": _call(lambda: w(3, V), lambda: torch.tensor([1, 2, 3])),
    "run_temperature_softmax": _call(lambda: w(V), _c(0.7)),
    "run_top_p_filter": _call(lambda: torch.full((V,), 1.0 / V), _c(0.5)),
    "run_sample_next_token": _call(lambda: w(V), _c(0.7), _c(0.9), lambda: torch.Generator().manual_seed(0)),
    "run_generate": _call(
        **{k: _c(v) for k, v in LM_ARGS.items()},
        weights=lm_weights,
        prompt=_c([1, 2]),
        max_new_tokens=_c(3),
        temperature=_c(0.7),
        top_p=_c(0.9),
        eos_token_id=_c(0),
        generator=lambda: torch.Generator().manual_seed(0),
    ),
}
