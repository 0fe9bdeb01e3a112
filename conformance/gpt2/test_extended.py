"""SPEC §6.1 "Extended": the appendix's schedule (warmup, cosine decay,
clipping after warmup) and the parameter count of GPT-2 small with and
without the tied output head. Optional: absent functions are "not provided"."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lmspec.conformance.asserts import assert_close, assert_equal
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.tolerances import Tolerance

GPT2_SMALL = {
    "vocab_size": 50257,
    "context_length": 1024,
    "emb_dim": 768,
    "n_heads": 12,
    "n_layers": 12,
    "drop_rate": 0.1,
    "qkv_bias": False,
}


def _lr(step, initial, peak, low, warmup, total):
    if step < warmup:
        return initial + step * (peak - initial) / warmup
    progress = (step - warmup) / (total - warmup)
    return low + (peak - low) * 0.5 * (1 + math.cos(math.pi * progress))


@sg.budget(20)
@pytest.mark.spec("gpt2.schedule")
@given(
    warmup=st.integers(1, 50),
    extra=st.integers(1, 200),
    data=st.data(),
    peak=st.sampled_from([5e-4, 1e-3, 6e-4]),
    initial=st.sampled_from([1e-5, 3e-5, 0.0001]),
)
def test_schedule_warmup_then_cosine(gpt2_lr_and_clip, warmup, extra, data, peak, initial):
    """Linear warmup from initial_lr to peak_lr, cosine down to min_lr; clipping only after warmup."""
    total = warmup + extra
    step = data.draw(st.integers(0, total), label="step")
    low = 0.1 * initial
    lr, clip = gpt2_lr_and_clip(
        global_step=step, initial_lr=initial, peak_lr=peak, min_lr=low, warmup_steps=warmup, total_training_steps=total
    )
    args = f"step {step}, warmup {warmup}, total {total}, lrs {initial}/{peak}/{low}"
    assert_close(lr, _lr(step, initial, peak, low, warmup, total), Tolerance(1e-12, 1e-9), rule="lr", context=args)
    if step != warmup:  # the book's printings use > and >= there: both accepted
        assert_equal(bool(clip), step > warmup, rule="gradients are clipped after warmup only", context=args)


@pytest.mark.spec("gpt2.param_count")
def test_gpt2_small_parameter_count(gpt2_count_parameters):
    """GPT-2 small: 163,009,536 parameters with its own head, 124,412,160 without it (tied)."""
    assert_equal(gpt2_count_parameters(cfg=GPT2_SMALL), [163_009_536, 124_412_160], rule="GPT-2 small's counts")


@pytest.mark.spec("gpt2.param_count")
def test_small_parameter_count(gpt2_count_parameters):
    """The count of a small configuration equals the book's weights (qkv biases included)."""
    c = o.cfg(qkv_bias=True)
    import torch

    w = o.model_weights(torch.Generator().manual_seed(0), c)
    total = sum(v.numel() for v in w.values())
    assert_equal(gpt2_count_parameters(cfg=c), [total, total - w["out_head.weight"].numel()], rule="parameter count")
