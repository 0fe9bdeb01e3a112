"""The sliding-window dataset and its loader (SPEC §6.1 "GPTDatasetV1")."""

from typing import Any

import torch
from jaxtyping import Integer
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

END_OF_TEXT = "<|endoftext|>"


class GPTDatasetV1(Dataset):
    """Windows of ``max_length`` token ids starting at ``0, stride, 2·stride, …``
    while ``start + max_length < len(ids)``; each target window is its input
    shifted by one id. ``tokenizer`` is a tiktoken-style encoder."""

    def __init__(self, txt: str, tokenizer: Any, max_length: int, stride: int) -> None:
        if max_length <= 0 or stride <= 0:
            raise ValueError(f"max_length ({max_length}) and stride ({stride}) must be positive")
        ids = torch.tensor(tokenizer.encode(txt, allowed_special={END_OF_TEXT}), dtype=torch.long)
        starts = range(0, len(ids) - max_length, stride)
        self.input_ids = [ids[s : s + max_length] for s in starts]
        self.target_ids = [ids[s + 1 : s + max_length + 1] for s in starts]

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> tuple[Integer[Tensor, " max_length"], Integer[Tensor, " max_length"]]:
        return self.input_ids[i], self.target_ids[i]


def create_dataloader_v1(
    txt: str,
    batch_size: int = 4,
    max_length: int = 256,
    stride: int = 128,
    shuffle: bool = True,
    drop_last: bool = True,
    num_workers: int = 0,
) -> DataLoader:
    """``GPTDatasetV1`` over GPT-2's encoding (``tiktoken.get_encoding("gpt2")``) in a DataLoader."""
    import tiktoken

    dataset = GPTDatasetV1(txt, tiktoken.get_encoding("gpt2"), max_length, stride)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, num_workers=num_workers)
