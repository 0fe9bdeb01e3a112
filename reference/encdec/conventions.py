"""The choices the encoder–decoder texts differ on (SPEC §6.2 ``get_conventions``).

The paper's choices are the defaults: an implementation that declares
nothing is held to them, and to biased attention projections (the common
codebases; the paper's have none: ``attention_bias=False``). The annotated
notes' set differs in four places.
"""

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

VALUES: dict[str, tuple[str | bool, ...]] = {
    "norm": ("post", "pre"),
    "layer_norm": ("biased", "annotated"),
    "activation": ("relu", "gelu"),
    "output": ("logits", "log_probs"),
    "masked_row": ("uniform", "nan"),
    "label_smoothing": ("annotated", "torch", "others"),
    "smoothing_loss": ("cross_entropy", "kl"),
    "attention_bias": (True, False),
}


@dataclass(frozen=True)
class Conventions:
    """One value per key of ``VALUES`` (the first one is the paper's)."""

    norm: Literal["post", "pre"] = "post"
    layer_norm: Literal["biased", "annotated"] = "biased"
    activation: Literal["relu", "gelu"] = "relu"
    output: Literal["logits", "log_probs"] = "logits"
    masked_row: Literal["uniform", "nan"] = "uniform"
    label_smoothing: Literal["annotated", "torch", "others"] = "annotated"
    smoothing_loss: Literal["cross_entropy", "kl"] = "cross_entropy"
    attention_bias: bool = True

    def __post_init__(self) -> None:
        for key, allowed in VALUES.items():
            if getattr(self, key) not in allowed:
                raise ValueError(f"convention {key}={getattr(self, key)!r}: expected one of {allowed}")

    def as_dict(self) -> dict[str, str | bool]:
        return asdict(self)

    def with_(self, **changes: Any) -> "Conventions":
        return replace(self, **changes)

    @property
    def layer_norm_eps(self) -> float:
        """The paper's LayerNorm uses 1e-5 inside the root, the annotated notes 1e-6 on the std."""
        return 1e-5 if self.layer_norm == "biased" else 1e-6


PAPER = Conventions()
ANNOTATED = Conventions(norm="pre", layer_norm="annotated", output="log_probs", smoothing_loss="kl")
