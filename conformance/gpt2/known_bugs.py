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
def _layernorm(
    x,
    w,
    *,
    eps: float = o.EPS,
    eps_outside: bool = False,
    unbiased: bool = False,
    centred: bool = True,
    scale: bool = True,
    shift: bool = True,
    dims: tuple[int, ...] = (-1,),
) -> torch.Tensor:
    """LayerNorm with each degree of freedom of ``scale·(x − mean)/sqrt(var + eps) + shift``
    as a switch: eps's value and placement, the variance's divisor, the centring
    (off: x/sqrt(mean(x²) + eps), RMS normalisation), scale and shift left out,
    the axes the statistics run over (``dims``)."""
    x = o.f64(x)
    dims = tuple(range(x.dim())) if dims == () else dims
    mean = x.mean(dims, keepdim=True) if centred else torch.zeros_like(x)
    var = (x - mean).square().sum(dims, keepdim=True) / (_count(x, dims) - unbiased)
    std = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    out = (x - mean) / std
    if scale:
        out = o.f64(w["scale"]) * out
    return out + o.f64(w["shift"]) if shift else out


def _count(x: torch.Tensor, dims: tuple[int, ...]) -> int:
    return math.prod(x.shape[d] for d in dims)


KNOWN_BUGS.add(
    "gpt2.layernorm",
    "unbiased variance (divides by n−1; the book's LayerNorm uses unbiased=False)",
    lambda x, w: _layernorm(x, w, unbiased=True),
)
KNOWN_BUGS.add(
    "gpt2.layernorm",
    "not centred: x/sqrt(mean(x²) + eps), the mean never subtracted (RMS normalisation)",
    lambda x, w: _layernorm(x, w, centred=False),
)
KNOWN_BUGS.add("gpt2.layernorm", "shift never added", lambda x, w: _layernorm(x, w, shift=False))
KNOWN_BUGS.add("gpt2.layernorm", "scale never applied", lambda x, w: _layernorm(x, w, scale=False))
KNOWN_BUGS.add(
    "gpt2.layernorm",
    "mean and variance over the whole tensor instead of the last axis",
    lambda x, w: _layernorm(x, w, dims=()),
)

# eps's placement and value show on near-constant rows only, which are STRICT: their own key
KNOWN_BUGS.add(
    "gpt2.layernorm/eps", "eps added outside the square root", lambda x, w: _layernorm(x, w, eps_outside=True)
)
KNOWN_BUGS.add("gpt2.layernorm/eps", "eps left out (0 instead of 1e-5)", lambda x, w: _layernorm(x, w, eps=0.0))
KNOWN_BUGS.add("gpt2.layernorm/eps", "eps 1e-6 instead of the book's 1e-5", lambda x, w: _layernorm(x, w, eps=1e-6))


# a fresh LayerNorm(emb_dim) (x) -> its output: the initial scale and shift
KNOWN_BUGS.add(
    "gpt2.layernorm/init",
    "scale initialised to zeros instead of ones",
    lambda x: _layernorm(x, {"scale": torch.zeros(x.shape[-1]), "shift": torch.zeros(x.shape[-1])}),
)
KNOWN_BUGS.add(
    "gpt2.layernorm/init",
    "shift initialised to ones instead of zeros",
    lambda x: _layernorm(x, {"scale": torch.ones(x.shape[-1]), "shift": torch.ones(x.shape[-1])}),
)


def _gelu_tanh(x, *, root: float = math.sqrt(2 / math.pi), cubic: float = 0.044715) -> torch.Tensor:
    """``0.5·x·(1 + tanh(root·(x + cubic·x³)))``, its two constants as switches."""
    x = o.f64(x)
    return 0.5 * x * (1 + torch.tanh(root * (x + cubic * x**3)))


@KNOWN_BUGS.register("gpt2.gelu", "exact erf GELU (F.gelu / nn.GELU default) instead of the tanh form")
def _gelu_erf(x) -> torch.Tensor:
    return F.gelu(o.f64(x))


KNOWN_BUGS.add("gpt2.gelu", "sqrt(2·π) instead of sqrt(2/π)", lambda x: _gelu_tanh(x, root=math.sqrt(2 * math.pi)))
KNOWN_BUGS.add("gpt2.gelu", "2/π without the square root", lambda x: _gelu_tanh(x, root=2 / math.pi))
KNOWN_BUGS.add("gpt2.gelu", "the cubic term 0.044715·x³ left out", lambda x: _gelu_tanh(x, cubic=0.0))
# a constant fixed at another value: 0.044715 with one of its digits dropped, as typed
for _typo in sorted({float("0.0" + "44715"[:i] + "44715"[i + 1 :]) for i in range(5)} | {0.44715}):
    KNOWN_BUGS.add(
        "gpt2.gelu",
        f"cubic coefficient {_typo:g} instead of 0.044715 (a digit dropped)",
        lambda x, c=_typo: _gelu_tanh(x, cubic=c),
    )


def _feedforward(x, w, activation) -> torch.Tensor:
    return o.linear(activation(o.linear(x, w, "layers.0.")), w, "layers.2.")


KNOWN_BUGS.add(
    "gpt2.feedforward", "exact erf GELU instead of the tanh form", lambda x, w: _feedforward(x, w, _gelu_erf)
)
KNOWN_BUGS.add("gpt2.feedforward", "ReLU instead of GELU", lambda x, w: _feedforward(x, w, torch.relu))
KNOWN_BUGS.add("gpt2.feedforward", "no activation between the two linears", lambda x, w: _feedforward(x, w, o.f64))


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


def _attention(
    x,
    w,
    heads: int,
    *,
    diagonal: int = 1,
    divisor=lambda head_dim, d_out: math.sqrt(head_dim),
    sources: tuple[str, str, str] = ("W_query", "W_key", "W_value"),
    merge_transposed: bool = True,
    out_bias: bool = True,
    dropped=None,
    scores_dropped=None,
) -> torch.Tensor:
    """The book's attention with its degrees of freedom as switches: the mask
    ``triu(ones, diagonal)`` filled with -inf (1 is right; with 0 the first
    position's row is all -inf: NaN, as the book's code gives), the scores'
    divisor (of head_dim and d_out), the projection each of query, key and
    value is made with, the heads merged with or without the transpose back
    to (tokens, heads), out_proj's bias; ``dropped(shape)``: the factors a
    dropout left active multiplies the attention weights by (``scores_dropped``:
    the masked scores, before the softmax)."""
    q, k, v = (o.split_heads(o.linear(x, w, f"{n}."), heads) for n in sources)
    t, head_dim = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / divisor(head_dim, head_dim * heads)
    scores = scores.masked_fill(torch.ones(t, t).triu(diagonal).bool(), -math.inf)
    if scores_dropped is not None:  # -inf·0 is NaN, as in float32
        scores = scores * scores_dropped(scores.shape)
    weights = torch.softmax(scores, -1)
    ctx = (weights if dropped is None else weights * dropped(weights.shape)) @ v
    merged = o.merge_heads(ctx) if merge_transposed else ctx.reshape(*ctx.shape[:-3], t, heads * head_dim)
    w = dict(w)
    if not out_bias:
        w.pop("out_proj.bias", None)
    return o.linear(merged, w, "out_proj.")


def _mha_mask(x, w, heads, diagonal: int) -> torch.Tensor:
    return _attention(x, w, heads, diagonal=diagonal)


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
for _cause, _divisor in (
    ("scores not divided by sqrt(head_dim)", lambda hd, d: 1.0),
    ("scores divided by sqrt(d_out) instead of sqrt(head_dim)", lambda hd, d: math.sqrt(d)),
    ("scores divided by head_dim instead of sqrt(head_dim)", lambda hd, d: float(hd)),
):
    KNOWN_BUGS.add("gpt2.mha", _cause, lambda x, w, heads, f=_divisor: _attention(x, w, heads, divisor=f))
for _cause, _sources in (
    ("values projected with W_key instead of W_value", ("W_query", "W_key", "W_key")),
    ("values projected with W_query instead of W_value", ("W_query", "W_key", "W_query")),
    ("keys projected with W_query instead of W_key", ("W_query", "W_query", "W_value")),
    ("queries projected with W_key instead of W_query", ("W_key", "W_key", "W_value")),
):
    KNOWN_BUGS.add("gpt2.mha", _cause, lambda x, w, heads, s=_sources: _attention(x, w, heads, sources=s))
KNOWN_BUGS.add(
    "gpt2.mha",
    "heads merged without the transpose back: (heads, tokens, head_dim) reshaped to (tokens, d_out)",
    lambda x, w, heads: _attention(x, w, heads, merge_transposed=False),
)
KNOWN_BUGS.add("gpt2.mha", "out_proj without its bias", lambda x, w, heads: _attention(x, w, heads, out_bias=False))


def _dropout_factors(p: float, seed: int):
    """shape -> what ``F.dropout(t, p, training=True)`` multiplies a float32 ``t``
    of that shape by when it is the first draw after ``torch.manual_seed(seed)``:
    0 or 1/(1 − p) (the same generator, seeded alike, draws the same mask)."""

    def factors(shape) -> torch.Tensor:
        kept = torch.empty(tuple(shape)).bernoulli_(1 - p, generator=torch.Generator().manual_seed(seed))
        return kept.to(o.F64) / (1 - p)

    return factors


# eval mode with a seed (x, weights, heads, dropout p, seed): a dropout that ignores
# the mode draws its mask from the seed the implementation was called with
# training mode (x, weights, heads, dropout p, seed), checked where dropout acts (STRICT)
KNOWN_BUGS.add(
    "gpt2.mha/train",
    "dropout on the masked scores before the softmax instead of on the attention weights",
    lambda x, w, heads, p, seed: _attention(x, w, heads, scores_dropped=_dropout_factors(p, seed)),
)
KNOWN_BUGS.add("gpt2.mha/train", "no dropout in training mode", lambda x, w, heads, p, seed: _attention(x, w, heads))
KNOWN_BUGS.add(
    "gpt2.mha/eval",
    "dropout on the attention weights active in eval mode (F.dropout(training=True), or the training flag ignored)",
    lambda x, w, heads, p, seed: _attention(x, w, heads, dropped=_dropout_factors(p, seed)),
)


# --- the block: (x, weights, heads) ---------------------------------------------------------
def _block(
    x,
    w,
    heads: int,
    *,
    norms: tuple[str, str] = ("norm1.", "norm2."),
    shortcuts: tuple[bool, bool] = (True, True),
    from_normed: tuple[bool, bool] = (False, False),
    post_norm: bool = False,
) -> torch.Tensor:
    """The pre-norm block with its degrees of freedom as switches, per sublayer
    (attention, then feed-forward): the norm it uses, its shortcut left out or
    taken from the normalised input, and the norm after the addition
    (post-norm) instead of before the sublayer."""
    x = o.f64(x)
    sublayers = (
        lambda h: o.mha(h, o.sub(w, "att."), heads),
        lambda h: o.feedforward(h, o.sub(w, "ff.")),
    )
    for norm, sublayer, shortcut, normed in zip(norms, sublayers, shortcuts, from_normed, strict=True):
        if post_norm:
            x = o.layernorm(x + sublayer(x), o.sub(w, norm))
            continue
        h = o.layernorm(x, o.sub(w, norm))
        out = sublayer(h)
        x = out + (h if normed else x) if shortcut else out
    return x


for _cause, _switch in (
    ("the attention's shortcut left out", {"shortcuts": (False, True)}),
    ("the feed-forward's shortcut left out", {"shortcuts": (True, False)}),
    ("the attention's shortcut adds the normalised input instead of the block's input", {"from_normed": (True, False)}),
    ("the feed-forward's shortcut adds the normalised input", {"from_normed": (False, True)}),
    ("norm1 used before the feed-forward too (norm2 unused)", {"norms": ("norm1.", "norm1.")}),
    ("norm2 used before the attention too (norm1 unused)", {"norms": ("norm2.", "norm2.")}),
    ("norm1 and norm2 swapped", {"norms": ("norm2.", "norm1.")}),
    ("post-norm: each LayerNorm after its residual addition instead of before its sublayer", {"post_norm": True}),
):
    KNOWN_BUGS.add("gpt2.block", _cause, lambda x, w, heads, kw=_switch: _block(x, w, heads, **kw))


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
KNOWN_BUGS.add(
    "gpt2.model",
    "the position embedding never added",
    lambda ids, w, c: o.model(ids, dict(w) | {"pos_emb.weight": torch.zeros_like(w["pos_emb.weight"])}, c),
)
KNOWN_BUGS.add(
    "gpt2.model", "final_norm skipped before out_head", lambda ids, w, c: o.model(ids, w, c, final_norm=False)
)
KNOWN_BUGS.add(
    "gpt2.model/eval",
    "the embeddings' dropout active in eval mode (F.dropout(training=True), or the training flag ignored)",
    lambda ids, w, c, seed: o.model(ids, w, c, embedded=lambda x: x * _dropout_factors(c["drop_rate"], seed)(x.shape)),
)
for _kept, _lost in (("out_head", "tok_emb"), ("tok_emb", "out_head")):
    KNOWN_BUGS.add(
        "gpt2.model",
        f"out_head.weight is tok_emb.weight (tied at construction): {_kept}'s weights, loaded last, serve both",
        lambda ids, w, c, k=_kept, lost=_lost: o.model(ids, dict(w) | {f"{lost}.weight": w[f"{k}.weight"]}, c),
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
KNOWN_BUGS.add("gpt2.load_weights", "ln_1 loaded into norm2 and ln_2 into norm1", _loaded(norms_swapped=True))


# --- the loss: ([(logits, targets) per batch], num_batches) -> float --------------------------
KNOWN_BUGS.add(
    "gpt2.loss",
    "the loss of the last position only",
    lambda batches, num: o.loader_loss([(x[:, -1:], y[:, -1:]) for x, y in batches], num),
)


KNOWN_BUGS.add(
    "gpt2.loss",
    "the sum of the batch losses, not their mean",
    lambda batches, num: o.loader_loss(batches, num) * len(batches[: len(batches) if num is None else num]),
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
KNOWN_BUGS.add(
    "gpt2.dataset",
    "windows advance by max_length whatever the stride",
    lambda ids, length, stride: _windows(ids, length, length, 0),
)


# --- generation: generate_text_simple (prompts, steps, weights, cfg, context_size) -------------
KNOWN_BUGS.add(
    "gpt2.generate_simple",
    "the first context_size ids are kept instead of the last",
    lambda prompts, steps, w, c, size: [o.greedy(p, steps, w, c, size, first_ids=True) for p in prompts],
)
KNOWN_BUGS.add(
    "gpt2.generate_simple",
    "the argmax of the first position's logits instead of the last's",
    lambda prompts, steps, w, c, size: [o.greedy(p, steps, w, c, size, position=0) for p in prompts],
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
KNOWN_BUGS.add(
    "gpt2.generate",
    "logits multiplied by the temperature instead of divided",
    _generate(temperature=lambda a: 1.0 / a["temperature"] if a["temperature"] > 0 else a["temperature"]),
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
KNOWN_BUGS.add(
    "gpt2.generate/draws",
    "logits multiplied by the temperature instead of divided",
    _drawn(temperature=lambda t: 1.0 / t),
)
