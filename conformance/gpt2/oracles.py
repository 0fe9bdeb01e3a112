"""Oracles of the gpt2 profile, computed apart from any implementation:
float64 torch built-ins (``F.layer_norm``, ``F.gelu(approximate="tanh")``,
``F.linear``, ``F.scaled_dot_product_attention(is_causal=True)``,
``F.cross_entropy``), a GPT-2 of the ``transformers`` library built locally
from a small ``GPT2Config`` (no download) for the checkpoint layout, and
tiktoken's GPT-2 encoding built offline from the fixture vocabulary.

Weights travel under the book's state-dict keys (SPEC §6.1). Some oracles
take switches that replay a known bug (``causal``, ``positions``,
``qkv_order``, ...): the profile's known bugs are registered in
``known_bugs.py``.
"""

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

Weights = dict[str, torch.Tensor]
F64 = torch.float64
EPS = 1e-5
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


def f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", F64)


def cfg(vocab=48, context=12, emb=16, heads=4, layers=2, drop=0.0, qkv_bias=False) -> dict[str, Any]:
    return {
        "vocab_size": vocab,
        "context_length": context,
        "emb_dim": emb,
        "n_heads": heads,
        "n_layers": layers,
        "drop_rate": drop,
        "qkv_bias": qkv_bias,
    }


# --- weights under the book's keys --------------------------------------------------
def _w(g: torch.Generator, *shape: int, std: float = 0.3) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * std


def linear_weights(g, prefix: str, d_in: int, d_out: int, bias: bool = True) -> Weights:
    out = {f"{prefix}weight": _w(g, d_out, d_in, std=1.0 / math.sqrt(d_in))}
    if bias:
        out[f"{prefix}bias"] = _w(g, d_out, std=0.2)
    return out


def norm_weights(g, prefix: str, emb: int) -> Weights:
    return {f"{prefix}scale": 1.0 + _w(g, emb, std=0.3), f"{prefix}shift": _w(g, emb, std=0.3)}


def mha_weights(g, d_in: int, d_out: int, qkv_bias: bool, prefix: str = "") -> Weights:
    out: Weights = {}
    for name in ("W_query", "W_key", "W_value"):
        out |= linear_weights(g, f"{prefix}{name}.", d_in, d_out, qkv_bias)
    return out | linear_weights(g, f"{prefix}out_proj.", d_out, d_out)


def ff_weights(g, emb: int, prefix: str = "") -> Weights:
    return linear_weights(g, f"{prefix}layers.0.", emb, 4 * emb) | linear_weights(g, f"{prefix}layers.2.", 4 * emb, emb)


def block_weights(g, c: Mapping[str, Any], prefix: str = "") -> Weights:
    e = c["emb_dim"]
    return (
        mha_weights(g, e, e, c["qkv_bias"], f"{prefix}att.")
        | ff_weights(g, e, f"{prefix}ff.")
        | norm_weights(g, f"{prefix}norm1.", e)
        | norm_weights(g, f"{prefix}norm2.", e)
    )


def model_weights(g, c: Mapping[str, Any]) -> Weights:
    e, v = c["emb_dim"], c["vocab_size"]
    out = {"tok_emb.weight": _w(g, v, e, std=1.0), "pos_emb.weight": _w(g, c["context_length"], e, std=1.0)}
    for i in range(c["n_layers"]):
        out |= block_weights(g, c, f"trf_blocks.{i}.")
    return out | norm_weights(g, "final_norm.", e) | {"out_head.weight": _w(g, v, e, std=0.5)}


def sub(weights: Mapping[str, torch.Tensor], prefix: str) -> Weights:
    return {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}


# --- float64 forward passes -----------------------------------------------------------
def layernorm(x, w: Mapping[str, torch.Tensor], eps: float = EPS) -> torch.Tensor:
    x = f64(x)
    return F.layer_norm(x, x.shape[-1:], f64(w["scale"]), f64(w["shift"]), eps)


def gelu(x) -> torch.Tensor:
    return F.gelu(f64(x), approximate="tanh")


def linear(x, w: Mapping[str, torch.Tensor], prefix: str = "") -> torch.Tensor:
    b = w.get(f"{prefix}bias")
    return F.linear(f64(x), f64(w[f"{prefix}weight"]), None if b is None else f64(b))


def feedforward(x, w) -> torch.Tensor:
    return linear(gelu(linear(x, w, "layers.0.")), w, "layers.2.")


def split_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t.unflatten(-1, (heads, t.shape[-1] // heads)).transpose(-3, -2)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-3, -2).flatten(-2)


def mha(x, w, heads: int, *, split=split_heads, causal: bool = True, out_bias: bool = True) -> torch.Tensor:
    q, k, v = (split(linear(x, w, f"{n}."), heads) for n in ("W_query", "W_key", "W_value"))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    w = dict(w)
    if not out_bias:
        w.pop("out_proj.bias", None)
    return linear(merge_heads(ctx), w, "out_proj.")


#: Parts swapped into a composite (hints only: "explained by gpt2.layernorm"):
#: "layernorm" (x, w), "mha" (x, w, heads), "feedforward" (x, w), "block" (x, w, heads).
Parts = Mapping[str, Any]


def block(x, w, heads: int, *, parts: Parts = {}) -> torch.Tensor:  # noqa: B006 (read only)
    x = f64(x)
    norm = parts.get("layernorm", layernorm)
    att, ff = parts.get("mha", mha), parts.get("feedforward", feedforward)
    x = x + f64(att(norm(x, sub(w, "norm1.")), sub(w, "att."), heads))
    return x + f64(ff(f64(norm(x, sub(w, "norm2."))), sub(w, "ff.")))


def model(
    ids: torch.Tensor,
    w,
    c: Mapping[str, Any],
    positions: torch.Tensor | None = None,
    *,
    parts: Parts = {},  # noqa: B006 (read only)
    final_norm: bool = True,
    embedded=None,
) -> torch.Tensor:
    """The logits (``final_norm=False``: out_head straight on the last block's
    output; ``embedded``: a function applied to the summed embeddings; known bugs)."""
    t = ids.shape[-1]
    pos = torch.arange(t) if positions is None else positions
    x = f64(w["tok_emb.weight"])[ids] + f64(w["pos_emb.weight"])[pos]
    if embedded is not None:
        x = embedded(x)
    for i in range(c["n_layers"]):
        if "block" in parts:
            x = f64(parts["block"](x, sub(w, f"trf_blocks.{i}."), c["n_heads"]))
        else:
            x = block(x, sub(w, f"trf_blocks.{i}."), c["n_heads"], parts=parts)
    norm = parts.get("layernorm", layernorm)
    if final_norm:
        x = f64(norm(x, sub(w, "final_norm.")))
    return linear(x, {"weight": w["out_head.weight"]})


def loss(logits: torch.Tensor, targets: torch.Tensor) -> float:
    return float(F.cross_entropy(f64(logits).flatten(0, -2), targets.flatten()))


def loader_loss(batches: list[tuple[torch.Tensor, torch.Tensor]], num_batches: int | None) -> float:
    """``calc_loss_loader`` on (logits, targets) batches: the mean loss of the
    first ``num_batches`` (all when None or when fewer are available)."""
    k = len(batches) if num_batches is None else min(num_batches, len(batches))
    return sum(loss(logits, y) for logits, y in batches[:k]) / k


# --- generation -------------------------------------------------------------------------
def next_logits(ids: list[int], w, c) -> torch.Tensor:
    return model(torch.tensor([ids[-c["context_length"] :]]), w, c)[0, -1]


def greedy(
    prompt: list[int], steps: int, w, c, context_size: int, *, first_ids: bool = False, position: int = -1
) -> list[int]:
    """``generate_text_simple`` on one row (``first_ids``: the model is given
    the first ``context_size`` ids instead of the last; ``position``: the
    logits read there instead of at the last position; known bugs)."""
    ids = list(prompt)
    for _ in range(steps):
        window = ids[:context_size] if first_ids else ids[-context_size:]
        ids.append(int(model(torch.tensor([window]), w, c)[0, position].argmax()))
    return ids


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    kth = torch.topk(logits, k).values[..., -1:]
    return logits.masked_fill(logits < kth, -math.inf)


def sampling_probs(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """The distribution ``generate`` samples from at ``temperature > 0``:
    ``softmax(top_k(logits) / temperature)``."""
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    return torch.softmax(logits / temperature, -1)


def generate(
    prompt: list[int],
    steps: int,
    w,
    c,
    *,
    temperature: float,
    top_k: int | None,
    eos_id: int | None,
    seed: int,
    append_eos: bool = False,
) -> list[int]:
    """The book's ``generate`` on one row: ``torch.manual_seed(seed)``, then per
    step the last logits (top-k filtered), argmax at temperature 0, else
    ``torch.multinomial`` of their softmax over the temperature; it stops
    without appending ``eos_id`` (``append_eos``: appended first, a known bug)."""
    torch.manual_seed(seed)
    ids = list(prompt)
    for _ in range(steps):
        logits = next_logits(ids, w, c)
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        if temperature > 0.0:
            probs = torch.softmax((logits / temperature).float(), -1)
            nxt = int(torch.multinomial(probs[None], num_samples=1))
        else:
            nxt = int(logits.argmax())
        if nxt == eos_id:
            if append_eos:
                ids.append(nxt)
            break
        ids.append(nxt)
    return ids


# --- the GPT-2 checkpoint layout, from transformers ---------------------------------------
def hf_gpt2(c: Mapping[str, Any], seed: int) -> Any:
    """A ``transformers`` GPT2LMHeadModel of config ``c`` (tanh GELU, eps 1e-5,
    no dropout), random weights from ``seed``; built locally, nothing downloaded."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=c["vocab_size"],
        n_positions=c["context_length"],
        n_embd=c["emb_dim"],
        n_layer=c["n_layers"],
        n_head=c["n_heads"],
        activation_function="gelu_new",
        bos_token_id=None,
        eos_token_id=None,
        layer_norm_epsilon=EPS,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # weights of order one (GPT-2's 0.02 init makes attention nearly uniform,
        # so a wrong split of Q and K would hide), biases and norms away from zero and one
        for name, p in hf.named_parameters():
            if name.endswith(".bias") or ".ln_" in name or name.startswith("transformer.ln_f"):
                p.add_(torch.randn_like(p) * 0.2)
            elif name.endswith(("wte.weight", "wpe.weight")):
                p.copy_(torch.randn_like(p))
            else:  # Conv1D weights are (in, out)
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[0]))
    return hf


def export_checkpoint(hf: Any) -> dict[str, Any]:
    """The model's weights in the original checkpoint's layout (numpy arrays):
    Conv1D weights are already (in, out), as in OpenAI's files."""

    def a(t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().numpy().copy()

    tr = hf.transformer
    blocks = []
    for h in tr.h:
        blocks.append(
            {
                "attn": {
                    "c_attn": {"w": a(h.attn.c_attn.weight), "b": a(h.attn.c_attn.bias)},
                    "c_proj": {"w": a(h.attn.c_proj.weight), "b": a(h.attn.c_proj.bias)},
                },
                "mlp": {
                    "c_fc": {"w": a(h.mlp.c_fc.weight), "b": a(h.mlp.c_fc.bias)},
                    "c_proj": {"w": a(h.mlp.c_proj.weight), "b": a(h.mlp.c_proj.bias)},
                },
                "ln_1": {"g": a(h.ln_1.weight), "b": a(h.ln_1.bias)},
                "ln_2": {"g": a(h.ln_2.weight), "b": a(h.ln_2.bias)},
            }
        )
    return {
        "wte": a(tr.wte.weight),
        "wpe": a(tr.wpe.weight),
        "blocks": blocks,
        "g": a(tr.ln_f.weight),
        "b": a(tr.ln_f.bias),
    }


def hf_logits(hf: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return hf(ids).logits


def book_weights_from_checkpoint(
    params: Mapping[str, Any], c: Mapping[str, Any], *, qkv_order=(0, 1, 2), attn_transposed=True, norms_swapped=False
):
    """The book's state dict from the checkpoint layout: a replay of
    ``load_weights_into_gpt`` with the split order, the transposition and
    which of ln_1, ln_2 goes to norm1 as parameters (the hints' replays)."""

    def t(m: Any) -> torch.Tensor:
        return torch.as_tensor(m).T

    out = {"tok_emb.weight": torch.as_tensor(params["wte"]), "pos_emb.weight": torch.as_tensor(params["wpe"])}
    for i, b in enumerate(params["blocks"]):
        p = f"trf_blocks.{i}."
        ws = np.split(b["attn"]["c_attn"]["w"], 3, axis=-1)
        bs = np.split(b["attn"]["c_attn"]["b"], 3, axis=-1)
        for name, j in zip(("W_query", "W_key", "W_value"), qkv_order, strict=True):
            out[f"{p}att.{name}.weight"] = t(ws[j]) if attn_transposed else torch.as_tensor(ws[j])
            out[f"{p}att.{name}.bias"] = torch.as_tensor(bs[j])
        for dst, src in (
            ("att.out_proj", b["attn"]["c_proj"]),
            ("ff.layers.0", b["mlp"]["c_fc"]),
            ("ff.layers.2", b["mlp"]["c_proj"]),
        ):
            out[f"{p}{dst}.weight"] = t(src["w"])
            out[f"{p}{dst}.bias"] = torch.as_tensor(src["b"])
        lns = (b["ln_2"], b["ln_1"]) if norms_swapped else (b["ln_1"], b["ln_2"])
        for dst, src in zip(("norm1", "norm2"), lns, strict=True):
            out[f"{p}{dst}.scale"] = torch.as_tensor(src["g"])
            out[f"{p}{dst}.shift"] = torch.as_tensor(src["b"])
    out["final_norm.scale"] = torch.as_tensor(params["g"])
    out["final_norm.shift"] = torch.as_tensor(params["b"])
    out["out_head.weight"] = torch.as_tensor(params["wte"])
    return out


# --- tiktoken GPT-2, offline --------------------------------------------------------------
_ENCODING: dict[str, Any] = {}


def gpt2_encoding(vocab_path: Path) -> Any:
    """tiktoken's GPT-2 encoding from the fixture vocabulary (its ids are the merge ranks)."""
    key = str(vocab_path)
    if key not in _ENCODING:
        import tiktoken

        kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
        to_byte, extra = {}, 0
        for b in range(256):
            if b in kept:
                to_byte[chr(b)] = b
            else:
                to_byte[chr(256 + extra)] = b
                extra += 1
        vocab = json.loads(Path(vocab_path).read_text(encoding="utf-8"))
        ranks = {bytes(to_byte[ch] for ch in tok): i for tok, i in vocab.items() if tok != END_OF_TEXT}
        _ENCODING[key] = tiktoken.Encoding(
            "gpt2-oracle", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={END_OF_TEXT: vocab[END_OF_TEXT]}
        )
    return _ENCODING[key]


def windows(ids: list[int], max_length: int, stride: int) -> tuple[list[list[int]], list[list[int]]]:
    starts = range(0, len(ids) - max_length, stride)
    return [ids[s : s + max_length] for s in starts], [ids[s + 1 : s + max_length + 1] for s in starts]
