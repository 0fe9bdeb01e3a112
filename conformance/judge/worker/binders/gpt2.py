"""Binder of the gpt2 profile (SPEC §6.1): a reader's module that defines the
book's names (``GPTModel``, ``MultiHeadAttention``, ``generate``, ...) becomes
the profile's adapter functions (conformance/profiles/gpt2.py).

Classes are built with the book's ``cfg`` dict (or the book's constructor
arguments) and loaded with the judge's weights under the book's state-dict
keys: ``load_state_dict(strict=False)``, then every parameter must have been
given and every given key must exist (a registered buffer such as the causal
mask is not a weight). Modules run in eval mode unless the call asks for
training mode, after ``torch.manual_seed(seed)`` when it gives a seed.

Renamed names: the graded file may import them under the book's names
(``from mymodel import MyGPT as GPTModel``); a module whose submodules are
named differently from the book's may define
``lmspec_map_weights(weights, module)`` returning the state dict ``module``
(the reader's freshly built module) expects.

``absent`` says why an adapter function could not be made, in the book's
words: the book's name that is not there, its chapter, and near misses by
spelling and by arguments (the judge shows it as the "not implemented"
reason, cleaned).

``prepare`` makes ``tiktoken.get_encoding("gpt2")`` work without a network,
from the GPT-2 vocabulary and merges the judge hands in (the profile's
``data``), before the reader's module is imported.
"""

import difflib
import inspect
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

END_OF_TEXT = "<|endoftext|>"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
#: book name -> the adapter functions it is needed for
NEEDS: dict[str, tuple[str, ...]] = {
    "gpt2_layernorm": ("LayerNorm",),
    "gpt2_gelu": ("GELU",),
    "gpt2_feedforward": ("FeedForward",),
    "gpt2_mha": ("MultiHeadAttention",),
    "gpt2_block": ("TransformerBlock",),
    "gpt2_model": ("GPTModel",),
    "gpt2_model_info": ("GPTModel",),
    "gpt2_generate_simple": ("GPTModel", "generate_text_simple"),
    "gpt2_generate": ("GPTModel", "generate"),
    "gpt2_generate_draws": ("GPTModel", "generate"),
    "gpt2_dataset": ("GPTDatasetV1",),
    "gpt2_dataloader": ("create_dataloader_v1",),
    "gpt2_loss_batch": ("GPTModel", "calc_loss_batch"),
    "gpt2_loss_loader": ("GPTModel", "calc_loss_loader"),
    "gpt2_load_weights": ("GPTModel", "load_weights_into_gpt"),
    "gpt2_lr_and_clip": ("get_lr_and_clip",),
    "gpt2_count_parameters": ("GPTModel",),
}
#: book name -> (the chapter that writes it, its arguments as the book writes them)
BOOK: dict[str, tuple[str, tuple[str, ...]]] = {
    "GPTDatasetV1": ("2", ("txt", "tokenizer", "max_length", "stride")),
    "create_dataloader_v1": ("2", ("txt", "batch_size", "max_length", "stride", "shuffle", "drop_last", "num_workers")),
    "MultiHeadAttention": ("3", ("d_in", "d_out", "context_length", "dropout", "num_heads", "qkv_bias")),
    "LayerNorm": ("4", ("emb_dim",)),
    "GELU": ("4", ()),
    "FeedForward": ("4", ("cfg",)),
    "TransformerBlock": ("4", ("cfg",)),
    "GPTModel": ("4", ("cfg",)),
    "generate_text_simple": ("4", ("model", "idx", "max_new_tokens", "context_size")),
    "calc_loss_batch": ("5", ("input_batch", "target_batch", "model", "device")),
    "calc_loss_loader": ("5", ("data_loader", "model", "device", "num_batches")),
    "generate": ("5", ("model", "idx", "max_new_tokens", "context_size", "temperature", "top_k", "eos_id")),
    "load_weights_into_gpt": ("5", ("gpt", "params")),
    "get_lr_and_clip": (
        "appendix D",
        ("global_step", "initial_lr", "peak_lr", "min_lr", "warmup_steps", "total_training_steps"),
    ),
}
_CLASSES = {"GPTDatasetV1", "MultiHeadAttention", "LayerNorm", "GELU", "FeedForward", "TransformerBlock", "GPTModel"}


def _bytes_of_printable() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 byte values (its vocabulary file's alphabet)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in kept:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def gpt2_encoding(vocab_path: Path) -> Any:
    """tiktoken's GPT-2 encoding, built from the vocabulary file alone (its ids
    are the merge ranks)."""
    import tiktoken

    to_byte = _bytes_of_printable()
    vocab = json.loads(Path(vocab_path).read_text(encoding="utf-8"))
    ranks = {bytes(to_byte[c] for c in token): rank for token, rank in vocab.items() if token != END_OF_TEXT}
    return tiktoken.Encoding(
        "gpt2",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={END_OF_TEXT: vocab[END_OF_TEXT]},
        explicit_n_vocab=len(vocab),
    )


def prepare(data: dict[str, Path]) -> None:
    """Register GPT-2's encoding with tiktoken (no download); without the
    vocabulary file the dataset functions fail with tiktoken's own error."""
    vocab = data.get("gpt2_vocab.json")
    if vocab is None:
        return
    try:
        import tiktoken.registry
    except ImportError:  # the dataset items then report the missing module
        return
    tiktoken.registry.ENCODINGS["gpt2"] = gpt2_encoding(vocab)


# --- building and loading ---------------------------------------------------------
class WeightsMismatch(KeyError):
    """The judge's weights do not fit the reader's module under the book's keys."""

    def __str__(self) -> str:
        return str(self.args[0])


def _load(module: torch.nn.Module, weights: Mapping[str, Any] | None, mapper: Callable | None) -> torch.nn.Module:
    if weights is None:
        return module
    weights = dict(weights)
    if mapper is not None:
        weights = dict(mapper(weights, module))
    params = {name for name, _ in module.named_parameters()}
    unexpected = sorted(set(weights) - set(module.state_dict()))
    missing = sorted(params - set(weights))
    if unexpected or missing:
        raise WeightsMismatch(
            f"{type(module).__name__}'s state dict does not have the book's keys: "
            f"keys it lacks {unexpected[:6]}, parameters not given {missing[:6]} "
            "(SPEC §6.1 lists the keys; lmspec_map_weights can translate)"
        )
    for name, value in weights.items():
        have = module.state_dict()[name]
        if tuple(have.shape) != tuple(value.shape):
            raise WeightsMismatch(
                f"{type(module).__name__}.{name}: the book's shape {tuple(value.shape)}, "
                f"the module's {tuple(have.shape)}"
            )
    module.load_state_dict(weights, strict=False)
    return module


def _run(module: torch.nn.Module, train: bool, seed: int | None, fn: Callable[[], Any]) -> Any:
    module.train(bool(train))
    if seed is not None:
        torch.manual_seed(int(seed))
    with torch.no_grad():
        return fn()


def _cfg(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg)


def _windows(dataset: Any) -> tuple[list[list[int]], list[list[int]]]:
    """Every (input, target) window of a dataset: indexed when it has a length
    and items, iterated otherwise (a generator-style dataset)."""
    if hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"):
        pairs = [dataset[i] for i in range(len(dataset))]
    else:
        pairs = list(iter(dataset))
    inputs = [torch.as_tensor(x).tolist() for x, _ in pairs]
    targets = [torch.as_tensor(y).tolist() for _, y in pairs]
    return inputs, targets


class _Once(torch.nn.Module):
    """A model in eval mode that computes once per input: a repeated call with
    the same ids returns a copy of the logits it gave."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.seen: tuple[torch.Tensor, torch.Tensor] | None = None

    def __getattr__(self, name: str) -> Any:
        """The model's own attributes (``model.pos_emb``, ``model.cfg``), as a
        reader's ``generate`` may read them."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["model"], name)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.seen is None or not torch.equal(self.seen[0], ids):
            with torch.no_grad():
                self.seen = (ids.clone(), self.model(ids))
        return self.seen[1].clone()


class _Reader:
    """The adapter functions over a reader's module: each builds the book's
    class from ``cfg`` (or its arguments), loads the suite's weights under the
    book's keys and calls it."""

    def __init__(self, names: Mapping[str, Any], mapper: Callable[..., Any] | None) -> None:
        self.names = names
        self.mapper = mapper

    def model(self, cfg: Mapping[str, Any], weights: Mapping[str, Any] | None) -> torch.nn.Module:
        return _load(self.names["GPTModel"](_cfg(cfg)), weights, self.mapper)

    def gpt2_layernorm(
        self, emb_dim: int, weights: Mapping[str, Any] | None, in_features: torch.Tensor
    ) -> torch.Tensor:
        norm = _load(self.names["LayerNorm"](emb_dim), weights, self.mapper)
        return _run(norm, False, None, lambda: norm(in_features))

    def gpt2_gelu(self, in_features: torch.Tensor) -> torch.Tensor:
        gelu = self.names["GELU"]()
        return gelu(in_features)

    def gpt2_feedforward(self, cfg: Mapping[str, Any], weights: Mapping[str, Any], in_features: torch.Tensor) -> Any:
        ff = _load(self.names["FeedForward"](_cfg(cfg)), weights, self.mapper)
        return _run(ff, False, None, lambda: ff(in_features))

    def gpt2_mha(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool,
        weights: Mapping[str, Any],
        in_features: torch.Tensor,
        train: bool = False,
        seed: int | None = None,
    ) -> torch.Tensor:
        mha = self.names["MultiHeadAttention"](d_in, d_out, context_length, dropout, num_heads, qkv_bias=qkv_bias)
        _load(mha, weights, self.mapper)
        return _run(mha, train, seed, lambda: mha(in_features))

    def gpt2_block(
        self,
        cfg: Mapping[str, Any],
        weights: Mapping[str, Any],
        in_features: torch.Tensor,
        train: bool = False,
        seed=None,
    ) -> torch.Tensor:
        block = _load(self.names["TransformerBlock"](_cfg(cfg)), weights, self.mapper)
        return _run(block, train, seed, lambda: block(in_features))

    def gpt2_model(
        self,
        cfg: Mapping[str, Any],
        weights: Mapping[str, Any] | None,
        in_idx: torch.Tensor,
        train: bool = False,
        seed=None,
    ) -> torch.Tensor:
        gpt = self.model(cfg, weights)
        return _run(gpt, train, seed, lambda: gpt(in_idx))

    def gpt2_model_info(self, cfg: Mapping[str, Any], weights: Mapping[str, Any]) -> dict[str, Any]:
        gpt = self.names["GPTModel"](_cfg(cfg))
        params = dict(gpt.named_parameters())
        head = getattr(gpt, "out_head", None)
        emb = getattr(gpt, "tok_emb", None)
        # the same storage: a weight shared at construction
        tied = bool(head is not None and emb is not None and head.weight.data_ptr() == emb.weight.data_ptr())
        init = {k: [float(v.min()), float(v.max())] for k, v in params.items() if k.endswith(("scale", "shift"))}
        try:
            _load(gpt, weights, self.mapper)
            problem = None
        except WeightsMismatch as exc:
            problem = str(exc)
        return {"weights_problem": problem, "tied": tied, "layernorm_init": init}

    def gpt2_count_parameters(self, cfg: Mapping[str, Any]) -> list[int]:
        try:
            with torch.device("meta"):
                gpt = self.names["GPTModel"](_cfg(cfg))
        except Exception:  # a module that cannot be built on the meta device
            gpt = self.names["GPTModel"](_cfg(cfg))
        total = sum(p.numel() for p in gpt.parameters())
        return [int(total), int(total - gpt.out_head.weight.numel())]

    def gpt2_generate_simple(self, cfg, weights, idx, max_new_tokens, context_size) -> torch.Tensor:
        gpt = self.model(cfg, weights).eval()
        return self.names["generate_text_simple"](gpt, idx, max_new_tokens, context_size)

    def gpt2_generate(
        self, cfg, weights, idx, max_new_tokens, context_size, temperature=0.0, top_k=None, eos_id=None, seed=0
    ) -> torch.Tensor:
        gpt = self.model(cfg, weights).eval()
        torch.manual_seed(int(seed))
        kwargs: dict[str, Any] = {"temperature": temperature, "top_k": top_k, "eos_id": eos_id}
        return self.names["generate"](gpt, idx, max_new_tokens, context_size, **kwargs)

    def gpt2_generate_draws(self, cfg, weights, idx, context_size, temperature, top_k=None, seeds=()) -> list[int]:
        """The id ``generate`` appends in one step, once per seed (``torch.manual_seed(seed)``
        before each call): many draws from one model, built once and run once
        (eval mode is deterministic: the same ids give the logits already computed)."""
        gpt = _Once(self.model(cfg, weights)).eval()
        first = idx.shape[-1]
        draws = []
        for seed in seeds:
            torch.manual_seed(int(seed))
            out = self.names["generate"](gpt, idx, 1, context_size, temperature=temperature, top_k=top_k)
            row = torch.as_tensor(out)[0].tolist()
            draws.append(int(row[first]) if len(row) > first else -1)
        return draws

    def gpt2_dataset(self, txt: str, max_length: int, stride: int) -> dict[str, list[list[int]]]:
        import tiktoken

        dataset = self.names["GPTDatasetV1"](txt, tiktoken.get_encoding("gpt2"), max_length, stride)
        inputs, targets = _windows(dataset)
        return {"inputs": inputs, "targets": targets}

    def gpt2_dataloader(self, txt, batch_size, max_length, stride, shuffle, drop_last, seed=0) -> list[list[Any]]:
        torch.manual_seed(int(seed))
        loader = self.names["create_dataloader_v1"](
            txt,
            batch_size=batch_size,
            max_length=max_length,
            stride=stride,
            shuffle=shuffle,
            drop_last=drop_last,
            num_workers=0,
        )
        return [[torch.as_tensor(x).tolist(), torch.as_tensor(y).tolist()] for x, y in loader]

    def gpt2_loss_batch(self, cfg, weights, input_batch, target_batch) -> float:
        gpt = self.model(cfg, weights).eval()
        with torch.no_grad():
            return float(self.names["calc_loss_batch"](input_batch, target_batch, gpt, "cpu"))

    def gpt2_loss_loader(self, cfg, weights, batches, num_batches=None) -> float:
        gpt = self.model(cfg, weights).eval()
        loader = [(torch.as_tensor(x), torch.as_tensor(y)) for x, y in batches]
        with torch.no_grad():
            return float(self.names["calc_loss_loader"](loader, gpt, "cpu", num_batches=num_batches))

    def gpt2_load_weights(self, cfg, params, in_idx) -> torch.Tensor:
        gpt = self.names["GPTModel"](_cfg(cfg))
        self.names["load_weights_into_gpt"](gpt, _as_numpy(params))
        gpt.eval()
        with torch.no_grad():
            return gpt(in_idx)

    def gpt2_lr_and_clip(
        self, global_step, initial_lr, peak_lr, min_lr, warmup_steps, total_training_steps
    ) -> list[Any]:
        lr, clip = self.names["get_lr_and_clip"](
            global_step, initial_lr, peak_lr, min_lr, warmup_steps, total_training_steps
        )
        return [float(lr), bool(clip)]


def bind(module: Any) -> dict[str, Callable[..., Any]]:
    """The adapter functions the module's names allow (the others are "not implemented")."""
    names = {n: getattr(module, n) for n in {n for needs in NEEDS.values() for n in needs} if hasattr(module, n)}
    mapper = getattr(module, "lmspec_map_weights", None)
    reader = _Reader(names, mapper if callable(mapper) else None)
    return {name: getattr(reader, name) for name, needs in NEEDS.items() if all(n in names for n in needs)}


def _arguments(obj: Any) -> tuple[str, ...] | None:
    """The parameter names of a function, or of a class's constructor (no ``self``)."""
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return None
    return tuple(p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))


def _near_misses(module: Any, name: str) -> list[str]:
    """Names the module defines that look like the book's ``name``: spelled
    alike (difflib, any case), or taking the book's arguments (shown with them)."""
    own = [n for n in dir(module) if not n.startswith("_") and n not in BOOK and n != "lmspec_map_weights"]
    own = [n for n in own if callable(getattr(module, n, None))]
    lowered = {n.lower(): n for n in own}
    spelled = [lowered[n] for n in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.75)]
    found = list(spelled)
    wanted = BOOK[name][1]
    want_class = name in _CLASSES
    for n in own:
        obj = getattr(module, n, None)
        if n in found or isinstance(obj, type) != want_class or getattr(obj, "__module__", "").startswith("torch"):
            continue
        if wanted and _arguments(obj) == wanted:
            found.append(f"{n}({', '.join(wanted)})")
    return found[:4]


def absent(module: Any) -> dict[str, str]:
    """Why each adapter function the module's names do not allow is missing,
    in the book's words: the book's name that is not there, where it was
    looked for, its chapter, and near misses by name and by arguments."""
    where = Path(str(getattr(module, "__file__", "") or "")).name or str(getattr(module, "__name__", "the module"))
    out = {}
    for function, needs in NEEDS.items():
        lacking = [n for n in needs if not hasattr(module, n)]
        if not lacking:
            continue
        parts = []
        for name in lacking:
            chapter, _ = BOOK[name]
            kind = "class" if name in _CLASSES else "function"
            text = f"no {kind} {name} in {where} (the book's name, chapter {chapter})".replace(
                "chapter appendix", "appendix"
            )
            found = _near_misses(module, name)
            if found:
                text += f"; found {', '.join(found)}: rename it, or map it in a small file (README)"
            parts.append(text)
        out[function] = "; ".join(parts)[:600]
    return out


def _as_numpy(params: Any) -> Any:
    """The checkpoint's arrays as numpy arrays (the book's loader reads numpy)."""
    if isinstance(params, torch.Tensor):
        return params.detach().cpu().numpy()
    if isinstance(params, dict):
        return {k: _as_numpy(v) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return [_as_numpy(v) for v in params]
    return np.asarray(params) if isinstance(params, np.ndarray) else params
