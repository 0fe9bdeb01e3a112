"""The decoder-only Transformer language model and its configuration (SPEC §2)."""

import torch
from jaxtyping import Float, Integer
from torch import Tensor, nn

from lmspec.reference.model_config import ModelConfig
from lmspec.reference.nn.block import TransformerBlock
from lmspec.reference.nn.embedding import Embedding
from lmspec.reference.nn.linear import Linear
from lmspec.reference.nn.rmsnorm import RMSNorm
from lmspec.reference.nn.rope import RotaryPositionalEmbedding


class TransformerLM(nn.Module):
    """``logits = lm_head(RMSNorm(block_L(… block_1(embed(ids)))))`` (SPEC §2).

    Submodules ``token_embeddings``, ``layers`` (a ModuleList), ``ln_final``
    (None when ``norm == "none"``) and ``lm_head`` give the CS336 state-dict
    keys. One RoPE (no parameters) is shared by every layer.
    """

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        factory = {"device": device, "dtype": dtype}
        self.token_embeddings = Embedding(config.vocab_size, config.d_model, **factory)
        rope = (
            RotaryPositionalEmbedding(float(config.rope_theta), config.d_head, config.context_length, device=device)
            if config.use_rope
            else None
        )
        self.layers = nn.ModuleList(
            TransformerBlock(
                config.d_model,
                config.num_heads,
                config.d_ff,
                rope,
                norm=config.norm,
                ffn=config.ffn,
                eps=config.eps,
                **factory,
            )
            for _ in range(config.num_layers)
        )
        self.ln_final = None if config.norm == "none" else RMSNorm(config.d_model, config.eps, **factory)
        self.lm_head = Linear(config.d_model, config.vocab_size, **factory)

    def forward(self, in_indices: Integer[Tensor, "... seq"]) -> Float[Tensor, "... seq vocab_size"]:
        """Unnormalised next-token logits for every position; any ``seq ≤ context_length``."""
        if in_indices.dtype not in (torch.int32, torch.int64):
            in_indices = in_indices.long()  # e.g. uint16 token files: torch cannot index with them
        self._check_indices(in_indices)
        x = self.token_embeddings(in_indices)
        for layer in self.layers:
            x = layer(x)
        if self.ln_final is not None:
            x = self.ln_final(x)
        return self.lm_head(x)

    def _check_indices(self, in_indices: Integer[Tensor, "... seq"]) -> None:
        seq, context_length = in_indices.shape[-1], self.config.context_length
        if seq > context_length:
            raise ValueError(f"sequence length ({seq}) exceeds context_length ({context_length})")
        if in_indices.numel() == 0:
            return
        # one reduction + one host sync per forward: negative ids would silently
        # index from the end, too-large ids are a device-side assert on CUDA
        low, high = (int(v) for v in torch.aminmax(in_indices))
        vocab_size = self.config.vocab_size
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"token id {bad} is out of range [0, vocab_size ({vocab_size}))")
