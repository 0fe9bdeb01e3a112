"""MUTANT: top-p in the shifted "cumsum > p" style: one token too many when a set hits p exactly."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "4.generation",
    "bug": ("removes tokens after the first with cumsum > p: a set whose mass equals p exactly gets one more token"),
    "run": ["4.generation"],
    "hinted": ["kept one token too many"],
}


def run_top_p_filter(probs, top_p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    remove = sorted_probs.cumsum(dim=-1) > top_p  # BUG: >= p already suffices
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    keep = torch.zeros_like(remove).scatter(-1, order, ~remove)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)
