"""MUTANT: top-p keeps tokens while the cumulative mass (including them) is < p: one too few."""

import torch

from lmspec.reference.adapter import *  # noqa: F403

MUTANT = {
    "spec": "4.generation",
    "bug": "top-p keeps sorted tokens with cumsum < p, dropping the token that reaches p",
    "run": ["4.generation"],
    "hinted": ["kept one token too few"],
}


def run_top_p_filter(probs, top_p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = sorted_probs.cumsum(dim=-1) < top_p  # BUG: should be the mass *before* each token
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)
