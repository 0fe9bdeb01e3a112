"""Token embedding: a row lookup by integer id (SPEC §2 "Embedding")."""

import torch
from jaxtyping import Float, Integer
from torch import Tensor, nn


class Embedding(nn.Module):
    """``out[..., :] = W[token_ids[...], :]``, ``W: (num_embeddings, embedding_dim)`` (SPEC §2).

    Init: truncated normal, mean 0, std 1, cut at ±3. Ids are not
    range-checked here (that costs a device sync per call); ``TransformerLM``
    checks them once per forward.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(f"num_embeddings ({num_embeddings}) and embedding_dim ({embedding_dim}) must be positive")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids: Integer[Tensor, " ..."]) -> Float[Tensor, "... embedding_dim"]:
        if token_ids.dtype not in (torch.int32, torch.int64):
            # subtle: uint8 indices would act as a boolean mask, and torch
            # refuses int16/uint16 (the usual dtype of token files) as indices
            token_ids = token_ids.long()
        return self.weight[token_ids]

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}"
