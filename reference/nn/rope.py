"""Rotary positional embedding with interleaved pairs (SPEC §2 "RoPE")."""

import torch
from jaxtyping import Float, Integer
from torch import Tensor, nn


def rope_tables(
    positions: Float[Tensor, " ..."], theta: float, d_k: int
) -> tuple[Float[Tensor, "... d_k"], Float[Tensor, "... d_k"]]:
    """cos/sin of ``θ_{i,k} = i / theta^(2k/d_k)``, laid out to rotate adjacent pairs.

    ``cos[..., 2k] = cos[..., 2k+1] = cos θ_k`` and ``sin[..., 2k] = −sin θ_k``,
    ``sin[..., 2k+1] = +sin θ_k``, so that (SPEC §2)
    ``RoPE(x) = x · cos + swap_pairs(x) · sin`` with ``swap_pairs(x)_{2k} = x_{2k+1}``,
    ``swap_pairs(x)_{2k+1} = x_{2k}``. Computed in the dtype of ``positions``.
    """
    exponents = torch.arange(0, d_k, 2, dtype=positions.dtype, device=positions.device) / d_k
    angles = positions[..., None] * theta**-exponents  # (..., d_k/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    # interleave so pair k occupies columns 2k and 2k+1, matching x's layout
    cos = torch.stack((cos, cos), dim=-1).flatten(-2)
    sin = torch.stack((-sin, sin), dim=-1).flatten(-2)
    return cos, sin


def swap_pairs(x: Float[Tensor, "... d_k"]) -> Float[Tensor, "... d_k"]:
    """``(x_0, x_1, x_2, x_3, …) → (x_1, x_0, x_3, x_2, …)``."""
    return x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)


class RotaryPositionalEmbedding(nn.Module):
    """Rotate each adjacent pair ``(x_{2k}, x_{2k+1})`` of the last axis by ``θ_{i,k}`` (SPEC §2).

    ``x'_{2k} = x_{2k} cos θ − x_{2k+1} sin θ``, ``x'_{2k+1} = x_{2k} sin θ + x_{2k+1} cos θ``
    with ``θ_{i,k} = i / theta^(2k/d_k)`` for token position ``i``.

    The tables (``cos``, ``sin``: ``(max_seq_len, d_k)``, layout in ``rope_tables``)
    are computed once in float64, stored as float32 non-persistent buffers (no
    state-dict keys, no parameters) and indexed by position. float64 inputs
    get float64 tables computed on the fly, so the reference can serve as a
    float64 oracle; other dtypes are rotated in (at least) float32 and returned
    in their own dtype. Note ``module.to(dtype)`` casts these buffers too; use
    autocast rather than ``.to(torch.bfloat16)`` to keep them in float32.
    """

    def __init__(
        self,
        theta: float,
        d_k: int,
        max_seq_len: int,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if d_k <= 0 or d_k % 2 != 0:
            raise ValueError(f"d_k ({d_k}) must be even")
        if max_seq_len <= 0:
            raise ValueError(f"max_seq_len ({max_seq_len}) must be positive")
        if not theta > 0:
            raise ValueError(f"theta ({theta}) must be positive")
        self.theta = theta
        self.d_k = d_k
        self.max_seq_len = max_seq_len
        positions = torch.arange(max_seq_len, dtype=torch.float64, device=device)
        cos, sin = rope_tables(positions, theta, d_k)
        self.cos: Tensor
        self.sin: Tensor
        self.register_buffer("cos", cos.to(torch.float32), persistent=False)
        self.register_buffer("sin", sin.to(torch.float32), persistent=False)

    def forward(
        self,
        x: Float[Tensor, "... seq d_k"],
        token_positions: Integer[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_k"]:
        """Rotate ``x``; ``token_positions`` broadcasts against ``x``'s leading axes
        (e.g. ``(seq,)`` with ``x`` of shape ``(batch, heads, seq, d_k)``) and
        defaults to ``0 .. seq-1``."""
        seq, d_k = x.shape[-2], x.shape[-1]
        if d_k != self.d_k:
            raise ValueError(f"x has last dimension {d_k}, this RoPE was built for d_k ({self.d_k})")
        if token_positions is None:
            if seq > self.max_seq_len:
                raise ValueError(f"sequence length ({seq}) exceeds max_seq_len ({self.max_seq_len})")
        else:
            if token_positions.dtype not in (torch.int32, torch.int64):
                # uint8 would index as a mask; uint16 cannot index (or aminmax) at all
                token_positions = token_positions.long()
            self._check_positions(token_positions)

        if x.dtype == torch.float64:
            positions = torch.arange(seq, device=x.device) if token_positions is None else token_positions
            cos, sin = rope_tables(positions.to(torch.float64), self.theta, self.d_k)
        elif token_positions is None:
            # positions 0..seq-1 are a prefix of the tables: a view, no gather
            cos, sin = self.cos[:seq], self.sin[:seq]
        else:
            cos, sin = self.cos[token_positions], self.sin[token_positions]

        rotated = torch.addcmul(x * cos, swap_pairs(x), sin)
        return rotated.to(x.dtype)

    def _check_positions(self, token_positions: Integer[Tensor, " ..."]) -> None:
        if token_positions.numel() == 0:
            return
        # one reduction and one host sync; an out-of-range index would otherwise
        # be a silent wrap (negative) or a device-side assert (CUDA)
        low, high = (int(v) for v in torch.aminmax(token_positions))
        if high >= self.max_seq_len:
            raise ValueError(
                f"token position {high} is out of range: positions must be < max_seq_len ({self.max_seq_len})"
            )
        if low < 0:
            raise ValueError(f"token position {low} is negative: positions must be >= 0")

    def extra_repr(self) -> str:
        return f"theta={self.theta}, d_k={self.d_k}, max_seq_len={self.max_seq_len}"
