"""The encdec single-switch catalog, generated from the registry: for every
known bug of the encdec profile (conformance/encdec/known_bugs.py), an
implementation that IS that switch (its replay, run in float32, under the
paper's conventions) goes through its item's own tests, each failing on a
pinned input and confirmed on the test's second; together they must name
exactly that cause: its own, and no other. Nobody picks these bugs: every
switch registered is one, the next one included (the twin of
tests/test_hints_switches.py, cs336's).

An undeclared convention's switch whose value is the paper's is the
declared behaviour under the paper's conventions (its replay refuses to run:
``known_bugs.Declared``): it is checked with that switch's own test against
the other value (tests/test_hints.py's convention tests), not here."""

from functools import partial

import pytest
import torch

from lmspec.conformance.encdec import cases as c
from lmspec.conformance.encdec import oracles as o
from lmspec.conformance.encdec import (
    test_attention,
    test_blocks,
    test_extended,
    test_layers,
    test_masks,
    test_model,
    test_training,
)
from lmspec.conformance.encdec.conventions import PAPER
from lmspec.conformance.encdec.known_bugs import KNOWN_BUGS, Declared
from lmspec.conformance.encdec.parts import SWAPS, EncdecParts
from lmspec.conformance.hints import explained_by, named_causes

CONV = PAPER


def _f32(x):
    return torch.as_tensor(x).detach().float() if torch.as_tensor(x).is_floating_point() else torch.as_tensor(x)


# --- one fake adapter function per item: the switch's replay with the adapter's signature ------------------
def _masks(part: str):
    def checks(replay):
        run = lambda **kw: replay(*kw.values())
        if part == "source":
            return [lambda: test_masks.test_source_mask(run, 0, 0)]
        # padding on the query axis shows only in the padding queries' rows (STRICT)
        return [lambda: test_masks._check_target(run, 0, 0, "real"), lambda: test_masks._check_target(run, 0, 1, "all")]

    return checks


def _attention(replay):
    def run(Q, K, V, mask=None):
        return replay(Q, K, V, mask).float()

    return [lambda: test_attention.test_attention_n_ne_m(run, 0, 5, 7)]


def _masked_row(replay):
    def run(Q, K, V, mask=None):
        return replay(Q, K, V, mask).float()

    return [lambda: test_attention.test_attention_fully_masked_row_as_declared(run, CONV)]


def _mha(replay):
    def run(d_model, num_heads, weights, query, key, value, mask=None):
        return replay(d_model, num_heads, weights, query, key, value, mask).float()

    return [
        lambda: test_attention.test_mha_separate_key_and_value(run, None, CONV, 0),
        lambda: test_attention.test_mha_self_attention_target_mask(run, None, CONV, 0),
    ]


def _ffn(replay):
    def run(d_model, d_ff, weights, in_features):
        return replay(weights, in_features, CONV).float()

    return [lambda: test_layers.test_feed_forward(run, CONV, 0, 16, 64)]


def _layernorm(replay):
    def run(d_model, weights, in_features):
        return replay(in_features, weights["weight"], weights["bias"], CONV).float()

    return [lambda: test_layers.test_layer_norm(run, CONV, 0, 16)]


def _positions(replay):
    return [lambda: test_layers.test_sinusoidal_positions(lambda max_len, d_model: replay(max_len, d_model), 50, 16)]


def _encoder_layer(replay):
    def run(d_model, num_heads, d_ff, weights, in_features, src_mask):
        return replay(d_model, num_heads, d_ff, weights, in_features, src_mask, CONV).float()

    return [lambda: test_blocks.test_encoder_layer(run, None, CONV, 0, 16, 4, 32)]


def _decoder_layer(replay):
    def run(d_model, num_heads, d_ff, weights, in_features, memory, src_mask, tgt_mask):
        return replay(d_model, num_heads, d_ff, weights, in_features, memory, src_mask, tgt_mask, CONV).float()

    return [lambda: test_blocks.test_decoder_layer(run, None, CONV, 0, 16, 4, 32)]


def _sizes(kw):
    return tuple(kw[k] for k in c.Sizes._fields)


def _model(replay):
    def run(weights, src, tgt, src_mask, tgt_mask, **sizes):
        return replay(_sizes(sizes), weights, src, tgt, src_mask, tgt_mask, CONV).float()

    # the smaller sizes: target ids within the source vocabulary (a table swapped still indexes)
    return [lambda: test_model.test_model_matches_oracle(run, None, CONV, 0, test_model.SIZES[1])]


def _greedy(replay):
    def run(weights, src, src_mask, max_len, start_id, end_id=None, **sizes):
        return replay(_sizes(sizes), weights, src, src_mask, max_len, start_id, end_id, CONV)

    return [
        lambda: test_model.test_greedy_matches_oracle(run, CONV, 0),
        lambda: test_model.test_greedy_stops_at_end_id(run, CONV, 0),
        lambda: test_model.test_greedy_stops_when_every_row_ended(run, CONV),
    ]


def _rate(replay):
    def run(step, d_model, factor, warmup):
        return replay(step, d_model, factor, warmup)

    steps = (1, 100, 4001, 20000)
    return [lambda s=s: test_training.test_rate(run, s, 512, 1.0, 4000) for s in steps] + [
        lambda: test_training.test_rate_step_zero(run)
    ]


def _smoothing(replay):
    def run(logits, target, smoothing, pad_id):
        return replay(logits, target, smoothing, pad_id, CONV).float()

    return [lambda: test_training.test_label_smoothing_loss(run, CONV, 0, 0.1, 0)]


def _alibi(replay):
    return [lambda: test_extended.test_alibi_bias(lambda num_heads, seq_len: replay(num_heads, seq_len).float(), 8, 6)]


def _local(replay):
    return [lambda: test_extended.test_local_attention_mask(lambda seq_len, window: replay(seq_len, window), 6, 2)]


def _rope(replay):
    def run(d_k, theta, max_seq_len, in_query_or_key, token_positions):
        return replay(in_query_or_key, token_positions, theta).float()

    return [lambda: test_extended.test_rope(run, (2, 6, 8), 10000.0)]


def _checkpointing(replay):
    def run(d_model, num_heads, d_ff, weights, in_features, src_mask, grad_output, checkpoint):
        args = (d_model, num_heads, d_ff, weights, in_features, src_mask, grad_output, CONV)
        if not checkpoint:
            return test_extended.o.encoder_layer_gradients(*args)
        return replay(*args)

    return [lambda: test_extended.test_checkpointing_same_output_and_gradients(run, CONV, 0)]


CHECKS = {
    "encdec.masks/source": _masks("source"),
    "encdec.masks/target": _masks("target"),
    "encdec.attention": _attention,
    "encdec.attention/masked_row": _masked_row,
    "encdec.mha": _mha,
    "encdec.ffn": _ffn,
    "encdec.layernorm": _layernorm,
    "encdec.positions": _positions,
    "encdec.encoder_layer": _encoder_layer,
    "encdec.decoder_layer": _decoder_layer,
    "encdec.model": _model,
    "encdec.greedy": _greedy,
    "encdec.rate": _rate,
    "encdec.label_smoothing": _smoothing,
    "encdec.alibi": _alibi,
    "encdec.local_attention": _local,
    "encdec.rope": _rope,
    "encdec.checkpointing": _checkpointing,
}
SWITCHES = list(KNOWN_BUGS)


def _declared_under_paper(bug) -> bool:
    """An undeclared convention's switch for the paper's own value."""
    return any(f"declare {key}={getattr(CONV, key)!r} " in bug.cause for key in CONV.__dataclass_fields__)


def test_every_item_of_the_registry_has_a_check():
    assert {b.item for b in SWITCHES} == set(CHECKS)


@pytest.mark.parametrize("bug", SWITCHES, ids=[f"{b.item}: {b.cause[:50]}" for b in SWITCHES])
def test_a_switch_gets_exactly_its_cause(bug):
    checks = CHECKS[bug.item](bug.replay)
    if _declared_under_paper(bug):
        with pytest.raises(Declared):
            checks[0]()
        return
    named, failed = [], 0
    for check in checks:
        try:
            check()
        except AssertionError as failure:
            failed += 1
            named += named_causes(str(failure))
        except pytest.fail.Exception as failure:
            failed += 1
            named += named_causes(str(failure))
    assert failed, f"no test of {bug.item} fails on the switch {bug.cause!r}"
    assert set(named) == {bug.cause}, named


# --- composites: a failing part explains them --------------------------------------------------------------
def _as_part(item: str, replay):
    """A part switch's replay with the oracle part's signature (oracles.Parts)."""
    if item == "encdec.layernorm":
        return lambda x, weight, bias, variant=None: replay(x, weight, bias, CONV)
    if item == "encdec.ffn":
        return lambda weights, x, activation=None: replay(weights, x, CONV)
    if item in ("encdec.encoder_layer", "encdec.decoder_layer"):
        return lambda *args: replay(*args, CONV)
    return replay  # attention, MHA, positions: the oracle's own signature


def _implementation(broken: dict):
    """Adapter functions (keyword calls, as the worker makes them) of an
    implementation whose every composite is built on the ``broken`` parts."""
    part = lambda name, default: broken.get(name, default)
    return {
        "run_attention": lambda Q, K, V, mask=None: part("attention", o.attention)(Q, K, V, mask).float(),
        "run_multihead_attention": lambda d_model, num_heads, weights, query, key, value, mask=None: part(
            "mha", partial(o.mha_formula, parts=broken)
        )(d_model, num_heads, weights, query, key, value, mask).float(),
        "run_feed_forward": lambda d_model, d_ff, weights, in_features: part("ffn", o.feed_forward)(
            weights, in_features, CONV.activation
        ).float(),
        "run_layer_norm": lambda d_model, weights, in_features: part("layernorm", o.layer_norm)(
            in_features, weights["weight"], weights["bias"], CONV.layer_norm
        ).float(),
        "run_sinusoidal_positions": lambda max_len, d_model: part("positions", o.positions)(max_len, d_model).float(),
        "run_encoder_layer": lambda d_model, num_heads, d_ff, weights, in_features, src_mask: part(
            "encoder_layer", partial(o.encoder_layer_formula, conv=CONV, parts=broken)
        )(d_model, num_heads, d_ff, weights, in_features, src_mask).float(),
        "run_decoder_layer": lambda d_model, num_heads, d_ff, weights, in_features, memory, src_mask, tgt_mask: part(
            "decoder_layer", partial(o.decoder_layer_formula, conv=CONV, parts=broken)
        )(d_model, num_heads, d_ff, weights, in_features, memory, src_mask, tgt_mask).float(),
    }


def _composite_checks(composite: str, impl: dict):
    fn = {k: v for k, v in impl.items()}
    if composite == "encdec.mha":
        run = lambda **kw: fn["run_multihead_attention"](**kw)
        return lambda: test_attention.test_mha_separate_key_and_value(run, impl, CONV, 0)
    if composite == "encdec.encoder_layer":
        return lambda: test_blocks.test_encoder_layer(
            lambda **kw: fn["run_encoder_layer"](**kw), impl, CONV, 0, 16, 4, 32
        )
    if composite == "encdec.decoder_layer":
        return lambda: test_blocks.test_decoder_layer(
            lambda **kw: fn["run_decoder_layer"](**kw), impl, CONV, 0, 16, 4, 32
        )
    broken = impl["_broken"]

    def run_model(weights, src, tgt, src_mask, tgt_mask, **sizes):
        return o.model(_sizes(sizes), weights, src, tgt, src_mask, tgt_mask, CONV, parts=broken).float()

    return lambda: test_model.test_model_matches_oracle(run_model, impl, CONV, 0, test_model.SIZES[1])


def _first_switch(item: str):
    return next(b for b in KNOWN_BUGS.of(item) if "get_conventions()" not in b.cause)


PART_CASES = [(composite, part, name) for composite, parts in SWAPS.items() for part, name in parts]


@pytest.fixture
def local_parts(monkeypatch):
    """EncdecParts calling a dict of local adapter functions instead of a worker."""
    monkeypatch.setattr(EncdecParts, "_call", lambda self, name, **kw: o.f64(self.impl[name](**kw)))


@pytest.mark.parametrize(("composite", "part", "name"), PART_CASES, ids=[f"{c}<-{p}" for c, p, _ in PART_CASES])
def test_a_failing_part_explains_its_composite(local_parts, composite, part, name):
    """The composite of an implementation whose ``part`` is that part's first
    switch names exactly ``explained by PART (fix that first)``."""
    switch = _first_switch(part)
    broken = {name: _as_part(part, switch.replay)}
    impl = {**_implementation(broken), "_broken": broken}
    with pytest.raises(AssertionError) as failure:
        _composite_checks(composite, impl)()
    assert named_causes(str(failure.value)) == [explained_by(part)], (switch.cause, str(failure.value)[:400])


@pytest.mark.parametrize(
    "conv",
    [PAPER, PAPER.with_(norm="pre"), PAPER.with_(layer_norm="annotated", activation="gelu")],
    ids=["paper", "pre-norm", "annotated+gelu"],
)
def test_written_out_composites_are_the_oracles(conv):
    """The composites written out for the swaps (oracles.mha_formula,
    *_layer_formula, Model(parts={})) give torch's layers' outputs."""
    g = c.generator(1)
    d, h, ff = 16, 4, 32
    mask = c.source_mask(c.tokens(g, [7, 5], 7, 11))
    w, x = c.encoder_layer_weights(g, d, ff), c.randn(g, 2, 7, d)
    same = lambda a, b: torch.allclose(a, b, rtol=1e-10, atol=1e-10)
    assert same(o.encoder_layer_formula(d, h, ff, w, x, mask, conv), o.encoder_layer(d, h, ff, w, x, mask, conv))
    w, x, memory = c.decoder_layer_weights(g, d, ff), c.randn(g, 2, 5, d), c.randn(g, 2, 7, d)
    tgt_mask = c.target_mask(c.tokens(g, [5, 4], 5, 11, start=True))
    assert same(
        o.decoder_layer_formula(d, h, ff, w, x, memory, mask, tgt_mask, conv),
        o.decoder_layer(d, h, ff, w, x, memory, mask, tgt_mask, conv),
    )
    mha = c.mha_weights(g, d)
    assert same(o.mha_formula(d, h, mha, x, memory, memory, mask), o.mha(d, h, mha, x, memory, memory, mask))
    sizes = c.Sizes(17, 19, 16, 2, 4, 32)
    weights = c.model_weights(g, sizes, conv.norm == "pre")
    src, tgt = c.tokens(g, [7, 4], 7, 17), c.tokens(g, [5, 3], 5, 19, start=True)
    inputs = (tuple(sizes), weights, src, tgt, c.source_mask(src), c.target_mask(tgt), conv)
    assert same(o.model(*inputs, parts={}), o.model(*inputs))


def test_a_layer_no_switch_reproduces_is_a_near_miss():
    """An encoder layer wrong from position 3 on, as no switch is: no cause,
    the facts of the near miss."""

    def run(d_model, num_heads, d_ff, weights, in_features, src_mask):
        out = o.encoder_layer(d_model, num_heads, d_ff, weights, in_features, src_mask, CONV)
        out[:, 3:] += 0.5
        return out.float()

    with pytest.raises(AssertionError) as failure:
        test_blocks.test_encoder_layer(run, None, CONV, 0, 16, 4, 32)
    message = str(failure.value)
    assert named_causes(message) == []
    assert "no known bug reproduces it; near miss: shape right, scale right, values right before position 3" in message
