"""The conventions an implementation declares (SPEC §6.2 ``get_conventions``).

A missing ``get_conventions``, or a missing key, means the paper's choice
(the first value of each key below), and biased attention projections (the
common codebases; ``attention_bias=False`` is the paper's: no bias is given). An unknown key or value fails every
test that needs the conventions, naming the allowed values. A hint that
points at an undeclared convention replays the other value (``undeclared``
names it; the replays are known_bugs.py's).
"""

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import pytest

from lmspec.conformance.asserts import describe_mismatch
from lmspec.conformance.judge.faults import NotImplementedByAdapter
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.judge.remote import RemoteFunction

VALUES: dict[str, tuple[Any, ...]] = {
    "norm": ("post", "pre"),
    "layer_norm": ("biased", "annotated"),
    "activation": ("relu", "gelu"),
    "output": ("logits", "log_probs"),
    "masked_row": ("uniform", "nan"),
    "label_smoothing": ("annotated", "torch", "others"),
    "smoothing_loss": ("cross_entropy", "kl"),
    "attention_bias": (True, False),
}

#: what an undeclared deviation looks like, per (key, value)
DESCRIBE: dict[tuple[str, Any], str] = {
    ("norm", "pre"): "pre-norm",
    ("norm", "post"): "post-norm",
    ("layer_norm", "annotated"): "the annotated notes' LayerNorm ((x − mean) / (unbiased std + 1e-6))",
    ("layer_norm", "biased"): "the paper's LayerNorm (biased variance, eps 1e-5 inside the root)",
    ("activation", "gelu"): "a GELU feed-forward",
    ("activation", "relu"): "a ReLU feed-forward",
    ("output", "log_probs"): "log-probabilities",
    ("output", "logits"): "logits",
    ("label_smoothing", "torch"): "torch's smoothing (ε / V on every class)",
    ("label_smoothing", "annotated"): "the annotated smoothing (ε / (V − 2), none on padding)",
    ("label_smoothing", "others"): "ε / (V − 1) on every class but the true one (fairseq's smoothing)",
    ("smoothing_loss", "kl"): "the KL divergence",
    ("smoothing_loss", "cross_entropy"): "the cross-entropy",
}


@dataclass(frozen=True)
class Conventions:
    norm: str = "post"
    layer_norm: str = "biased"
    activation: str = "relu"
    output: str = "logits"
    masked_row: str = "uniform"
    label_smoothing: str = "annotated"
    smoothing_loss: str = "cross_entropy"
    attention_bias: bool = True

    def with_(self, **changes: Any) -> "Conventions":
        return replace(self, **changes)

    def declared(self, *keys: str) -> str:
        """``key='value', ...`` for the given keys (every key by default)."""
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in (keys or [f.name for f in fields(self)]))


PAPER = Conventions()


def undeclared(key: str, value: Any) -> str:
    """The hint that names an undeclared convention: "outputs match pre-norm:
    declare norm='pre' in get_conventions()"."""
    return (
        f"outputs match {DESCRIBE.get((key, value), f'{key}={value!r}')}: declare {key}={value!r} in get_conventions()"
    )


def expected(conv: Conventions, oracle: Callable[[Conventions], Any], actual: Any, tol: Any) -> Any:
    """``oracle(conv)``; for a declared GELU, the tanh approximation's value
    instead when it is the one ``actual`` matches (the texts use both)."""
    value = oracle(conv)
    if conv.activation != "gelu" or describe_mismatch(actual, value, tol) is None:
        return value
    approx = oracle(conv.with_(activation="gelu_tanh"))
    return approx if describe_mismatch(actual, approx, tol) is None else value


def parse(declared: Any) -> Conventions:
    """The declared dict checked against ``VALUES`` (ValueError naming the problem)."""
    if declared is None:
        return PAPER
    if not isinstance(declared, dict):
        raise ValueError(f"get_conventions() must return a dict, got {type(declared).__name__}")
    unknown = sorted(set(map(str, declared)) - set(VALUES))
    if unknown:
        raise ValueError(f"get_conventions(): unknown keys {unknown} (known: {sorted(VALUES)})")
    values: dict[str, Any] = {}
    for key, value in declared.items():
        allowed = VALUES[key]
        boolean = isinstance(allowed[0], bool)
        # 1 is not True (nor True a name): a boolean key takes a bool, the others a string
        if isinstance(value, bool) != boolean or (not boolean and not isinstance(value, str)) or value not in allowed:
            raise ValueError(f"get_conventions(): {key}={value!r} is not one of {allowed}")
        values[str(key)] = bool(value) if boolean else str(value)
    return Conventions(**values)


def without_attention_bias(weights: dict[str, Any], conv: Conventions) -> dict[str, Any]:
    """``weights`` as the implementation is given them: without the attention
    projections' biases (``q_proj.bias`` ... ``out_proj.bias`` under any
    prefix) when it declares ``attention_bias=False``."""
    if conv.attention_bias:
        return weights
    return {k: v for k, v in weights.items() if not _is_attention_bias(k)}


def _is_attention_bias(key: str) -> bool:
    parts = key.split(".")
    return len(parts) >= 2 and parts[-1] == "bias" and parts[-2] in ("q_proj", "k_proj", "v_proj", "out_proj")


@pytest.fixture(scope="session")
def conventions(impl: Implementation) -> Conventions:
    """What the implementation declares (the paper's choices when it declares nothing)."""
    if not impl.has("get_conventions"):
        return PAPER
    try:
        return parse(RemoteFunction(impl, "get_conventions")())
    except NotImplementedByAdapter:
        return PAPER
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
