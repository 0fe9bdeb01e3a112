"""The known bugs of the gpt2 profile's items (SPEC §6.1), replayed on the
float64 oracles of ``oracles.py``: one registry, ``KNOWN_BUGS``, read by the
test modules of conformance/gpt2.

A replay takes the inputs its item's oracle takes and returns what the bug
gives. A test names a cause only when the replay reproduces the
implementation's output on the failing input and on the test's second input
(conformance/hints.py: ``assert_close(..., hints=KNOWN_BUGS.thunks(item,
...), again=...)``; ``checks.assert_equal_explained`` for exact outputs).
"""

import math

import torch
import torch.nn.functional as F

from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.hints import KnownBugs

KNOWN_BUGS = KnownBugs()


# --- LayerNorm, GELU, FeedForward: (x, weights) ---------------------------------------------
@KNOWN_BUGS.register("gpt2.layernorm", "unbiased variance (divides by n−1; the book's LayerNorm uses unbiased=False)")
def _layernorm_unbiased(x, w) -> torch.Tensor:
    x = o.f64(x)
    mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=True)
    return o.f64(w["scale"]) * (x - mean) / torch.sqrt(var + o.EPS) + o.f64(w["shift"])


# the placement shows on near-constant rows only, which are STRICT: their own key
@KNOWN_BUGS.register("gpt2.layernorm/eps", "eps added outside the square root")
def _layernorm_eps_outside(x, w) -> torch.Tensor:
    x = o.f64(x)
    mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return o.f64(w["scale"]) * (x - mean) / (torch.sqrt(var) + o.EPS) + o.f64(w["shift"])


@KNOWN_BUGS.register("gpt2.gelu", "exact erf GELU (F.gelu / nn.GELU default) instead of the tanh form")
def _gelu_erf(x) -> torch.Tensor:
    return F.gelu(o.f64(x))


@KNOWN_BUGS.register("gpt2.feedforward", "exact erf GELU instead of the tanh form")
def _feedforward_erf(x, w) -> torch.Tensor:
    return o.linear(_gelu_erf(o.linear(x, w, "layers.0.")), w, "layers.2.")


# --- multi-head attention: (x, weights, heads) ------------------------------------------------
def _qkv(x, w, heads, split=o.split_heads):
    return (split(o.linear(x, w, f"{n}."), heads) for n in ("W_query", "W_key", "W_value"))


def _split_interleaved(t: torch.Tensor, heads: int) -> torch.Tensor:
    """Heads as every ``heads``-th column: (head_dim, heads) instead of (heads, head_dim)."""
    return t.unflatten(-1, (t.shape[-1] // heads, heads)).transpose(-1, -2).transpose(-3, -2)


@KNOWN_BUGS.register("gpt2.mha", "heads split interleaved (columns h, h+H, ...) instead of contiguous blocks")
def _mha_interleaved(x, w, heads) -> torch.Tensor:
    q, k, v = _qkv(x, w, heads, _split_interleaved)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.linear(ctx.transpose(-3, -2).transpose(-1, -2).flatten(-2), w, "out_proj.")


KNOWN_BUGS.add(
    "gpt2.mha", "no causal mask (every position sees the future)", lambda x, w, heads: o.mha(x, w, heads, causal=False)
)


def _mha_mask(x, w, heads, diagonal: int) -> torch.Tensor:
    """Attention with ``triu(ones, diagonal)`` filled with -inf (1 is right;
    with 0 the first position's row is all -inf: NaN, as the book's code gives)."""
    q, k, v = _qkv(x, w, heads)
    t = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(t, t).triu(diagonal).bool(), -math.inf)
    ctx = torch.softmax(scores, -1) @ v
    return o.linear(o.merge_heads(ctx), w, "out_proj.")


KNOWN_BUGS.add(
    "gpt2.mha",
    "mask diagonal off by one: triu(diagonal=0) hides each position from itself",
    lambda x, w, heads: _mha_mask(x, w, heads, 0),
)
KNOWN_BUGS.add(
    "gpt2.mha",
    "mask diagonal off by one: triu(diagonal=2) lets each position see the next one",
    lambda x, w, heads: _mha_mask(x, w, heads, 2),
)


# --- the model: (ids, weights, cfg) -----------------------------------------------------------
KNOWN_BUGS.add(
    "gpt2.model",
    "position ids not arange(tokens) (reversed)",
    lambda ids, w, c: o.model(ids, w, c, positions=torch.arange(ids.shape[-1]).flip(0)),
)
KNOWN_BUGS.add(  # fails (so is not named) when tokens == context_length: no position id there
    "gpt2.model",
    "position ids start at 1 instead of 0",
    lambda ids, w, c: o.model(ids, w, c, positions=torch.arange(1, ids.shape[-1] + 1)),
)


# --- load_weights_into_gpt: (ids, checkpoint params, cfg) -> logits ---------------------------
def _loaded(**switches):
    return lambda ids, params, c: o.model(ids, o.book_weights_from_checkpoint(params, c, **switches), c)


for _order in ((0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1)):
    KNOWN_BUGS.add(
        "gpt2.load_weights",
        f"c_attn split in the order {_order} instead of query, key, value",
        _loaded(qkv_order=_order),
    )
KNOWN_BUGS.add(
    "gpt2.load_weights", "c_attn's query/key/value matrices not transposed into Linear", _loaded(attn_transposed=False)
)


# --- the loss: ([(logits, targets) per batch], num_batches) -> float --------------------------
KNOWN_BUGS.add(
    "gpt2.loss",
    "the loss of the last position only",
    lambda batches, num: o.loader_loss([(x[:, -1:], y[:, -1:]) for x, y in batches], num),
)


@KNOWN_BUGS.register("gpt2.loss", "divided by num_batches although fewer batches ran")
def _divided_by_requested(batches, num) -> float:
    n = len(batches) if num is None else num
    return sum(o.loss(x, y) for x, y in batches[:n]) / n


# --- the dataset: (ids, max_length, stride) -> (input windows, target windows) -------------------
def _windows(ids, max_length, stride, stop, shift=1):
    starts = range(0, len(ids) - max_length + stop, stride)
    return [ids[s : s + max_length] for s in starts], [ids[s + shift : s + max_length + shift] for s in starts]


KNOWN_BUGS.add(
    "gpt2.dataset",
    "windows stop one early (start + max_length + 1 < len)",
    lambda ids, length, stride: _windows(ids, length, stride, -1),
)
KNOWN_BUGS.add(
    "gpt2.dataset",
    "one window too many (start + max_length ≤ len)",
    lambda ids, length, stride: _windows(ids, length, stride, 1),
)
KNOWN_BUGS.add(
    "gpt2.dataset", "targets not shifted by one", lambda ids, length, stride: _windows(ids, length, stride, 0, shift=0)
)


# --- generation: generate_text_simple (prompts, steps, weights, cfg, context_size) -------------
KNOWN_BUGS.add(
    "gpt2.generate_simple",
    "the first context_size ids are kept instead of the last",
    lambda prompts, steps, w, c, size: [o.greedy(p, steps, w, c, size, first_ids=True) for p in prompts],
)


# --- generate, on a batch of one (prompt, steps, weights, cfg, temperature, top_k, eos_id, seed) --
def _generate(**changes):
    def replay(prompt, steps, w, c, temperature, top_k, eos_id, seed):
        args = {"temperature": temperature, "top_k": top_k, "eos_id": eos_id, "seed": seed}
        args |= {k: f(args) for k, f in changes.items()}
        return [o.generate(prompt, steps, w, c, **args)]

    return replay


def _k_minus_one(args):
    k = args["top_k"]
    if k is not None and k < 2:
        raise ValueError("top-k keeps k−1 ids: nothing is left of k = 1")
    return None if k is None else k - 1


KNOWN_BUGS.add(
    "gpt2.generate",
    "top-k keeps k+1 ids (off by one)",
    _generate(top_k=lambda a: None if a["top_k"] is None else a["top_k"] + 1),
)
KNOWN_BUGS.add("gpt2.generate", "top-k keeps k−1 ids (off by one)", _generate(top_k=_k_minus_one))
KNOWN_BUGS.add(
    "gpt2.generate",
    "logits not divided by the temperature",
    _generate(temperature=lambda a: 1.0 if a["temperature"] > 0 else a["temperature"]),
)
KNOWN_BUGS.add("gpt2.generate", "the eos id is appended before stopping", _generate(append_eos=lambda a: True))


# --- the distribution one sampling step draws from (logits, temperature, top_k) -------------
def _drawn(temperature=lambda t: t, top_k=lambda k: k):
    def replay(logits, t, k):
        return o.sampling_probs(logits, temperature(t), top_k(k))

    return replay


def _fewer(k):
    if k is not None and k < 2:
        raise ValueError("top-k keeps k−1 ids: nothing is left of k = 1")
    return None if k is None else k - 1


KNOWN_BUGS.add(
    "gpt2.generate/draws", "top-k keeps k+1 ids (off by one)", _drawn(top_k=lambda k: None if k is None else k + 1)
)
KNOWN_BUGS.add("gpt2.generate/draws", "top-k keeps k−1 ids (off by one)", _drawn(top_k=_fewer))
KNOWN_BUGS.add("gpt2.generate/draws", "logits not divided by the temperature", _drawn(temperature=lambda t: 1.0))
