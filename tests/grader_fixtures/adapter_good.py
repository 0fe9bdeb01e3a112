"""A small correct adapter for the stand-in suite (suite_small.py): the four
core functions it tests, from scratch. No extended functions ("not provided")."""

import math

import torch


def run_softmax(in_features, dim):
    shifted = in_features - in_features.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def run_silu(in_features):
    return in_features * torch.sigmoid(in_features)


def run_linear(d_in, d_out, weights, in_features):
    return in_features @ weights.T


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return max_learning_rate * it / warmup_iters
    if it <= cosine_cycle_iters:
        frac = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
        return min_learning_rate + 0.5 * (1 + math.cos(math.pi * frac)) * (max_learning_rate - min_learning_rate)
    return min_learning_rate
