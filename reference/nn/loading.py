"""Load CS336-style state dicts with readable errors (SPEC §2 state-dict names)."""

from collections.abc import Mapping

from torch import Tensor, nn


def load_weights(module: nn.Module, weights: Mapping[str, Tensor]) -> None:
    """Copy ``weights`` into ``module`` (dtype/device converted by ``copy_``), strictly.

    Raises a ValueError listing every missing key, unexpected key and shape
    mismatch at once, so a wrong key scheme is visible in one message instead
    of torch's first-error-only RuntimeError.
    """
    expected = module.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    mismatched = [
        f"{key}: expected {tuple(expected[key].shape)}, got {tuple(weights[key].shape)}"
        for key in sorted(set(expected) & set(weights))
        if tuple(weights[key].shape) != tuple(expected[key].shape)
    ]
    if missing or unexpected or mismatched:
        lines = [f"cannot load weights into {type(module).__name__}:"]
        for title, items in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("shape mismatches", mismatched),
        ):
            if items:
                lines.append(f"  {title} ({len(items)}): " + ", ".join(items))
        raise ValueError("\n".join(lines))
    module.load_state_dict(dict(weights), strict=True)
