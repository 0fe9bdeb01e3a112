"""The shape and ablation switches of the Transformer LM (SPEC §2), apart
from the model itself so that configuration (the CLI, config files) never
imports torch."""

from dataclasses import dataclass

NORM_POSITIONS: tuple[str, ...] = ("pre", "post", "none")
FFN_KINDS: tuple[str, ...] = ("swiglu", "silu")


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    """Raise a ValueError naming ``name``, ``value`` and the allowed values."""
    if value not in allowed:
        raise ValueError(f"{name} ({value!r}) must be one of {', '.join(map(repr, allowed))}")


@dataclass(frozen=True)
class ModelConfig:
    """Shape and ablation switches of a ``TransformerLM`` (SPEC §2).

    ``norm``: "pre" (default) | "post" | "none" ("none" also drops ``ln_final``);
    ``use_rope``: False gives NoPE; ``ffn``: "swiglu" (default) | "silu".
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    # int accepted too: beartype, unlike PEP 484, does not let int stand for float
    rope_theta: float | int = 10000.0
    eps: float = 1e-5
    norm: str = "pre"
    use_rope: bool = True
    ffn: str = "swiglu"

    def __post_init__(self) -> None:
        check_choice("norm", self.norm, NORM_POSITIONS)
        check_choice("ffn", self.ffn, FFN_KINDS)
        for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"):
            value = getattr(self, name)
            if value <= 0:
                raise ValueError(f"{name} ({value}) must be positive")
        if self.d_model % self.num_heads != 0:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        if self.use_rope and self.d_head % 2 != 0:
            raise ValueError(
                f"RoPE needs an even head dimension: d_model / num_heads "
                f"({self.d_model} / {self.num_heads} = {self.d_head}) is odd"
            )
        if not self.rope_theta > 0:
            raise ValueError(f"rope_theta ({self.rope_theta}) must be positive")
        if not self.eps > 0:
            raise ValueError(f"eps ({self.eps}) must be positive")

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads
