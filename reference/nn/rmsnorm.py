"""Root-mean-square layer normalisation (SPEC §2 "RMSNorm")."""

import torch
from jaxtyping import Float
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """``y_i = x_i / sqrt(mean_j x_j² + eps) · g_i``, gain ``g`` initialised to ones.

    Computed in at least float32 and returned in the input dtype (SPEC §2):
    bf16/fp16 inputs are upcast, float64 inputs stay float64.
    """

    def __init__(
        self,
        d_model: int,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if d_model <= 0:
            raise ValueError(f"d_model ({d_model}) must be positive")
        if not eps > 0:
            raise ValueError(f"eps ({eps}) must be positive")
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        in_dtype = x.dtype
        # upcast: the spec requires the mean of squares in (at least) fp32;
        # promote_types keeps float64 inputs exact instead of rounding them.
        compute_dtype = torch.promote_types(in_dtype, torch.float32)
        x = x.to(compute_dtype)
        inv_rms = torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + self.eps)
        return (x * inv_rms * self.weight.to(compute_dtype)).to(in_dtype)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"
