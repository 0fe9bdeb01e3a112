"""VARIANT (gpt2): the dataset as a generator of windows (an
IterableDataset that yields (input, target) pairs lazily, no list of
tensors kept), and a loader that shuffles by materialising the windows only
when asked to; the rest is the reference."""

import tiktoken
import torch
from torch.utils.data import DataLoader, IterableDataset

from lmspec.reference.gpt2 import *  # noqa: F403

VARIANT = {"profile": "gpt2", "what": "dataset as a generator of windows", "run": ["gpt2.dataset"]}


class GPTDatasetV1(IterableDataset):
    def __init__(self, txt, tokenizer, max_length, stride):
        self.ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        self.max_length, self.stride = max_length, stride

    def __iter__(self):
        start = 0
        while start + self.max_length < len(self.ids):
            window = self.ids[start : start + self.max_length + 1]
            yield torch.tensor(window[:-1]), torch.tensor(window[1:])
            start += self.stride


def create_dataloader_v1(txt, batch_size=4, max_length=256, stride=128, shuffle=True, drop_last=True, num_workers=0):
    dataset = GPTDatasetV1(txt, tiktoken.get_encoding("gpt2"), max_length, stride)
    if shuffle:  # an IterableDataset cannot be shuffled by the DataLoader
        return DataLoader(list(dataset), batch_size, shuffle=True, drop_last=drop_last, num_workers=num_workers)
    return DataLoader(dataset, batch_size, drop_last=drop_last, num_workers=num_workers)
