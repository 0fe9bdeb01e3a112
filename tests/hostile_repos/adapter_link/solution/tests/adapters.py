import torch


def run_silu(in_features):
    return in_features * torch.sigmoid(in_features)
