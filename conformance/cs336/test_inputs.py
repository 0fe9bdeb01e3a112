"""STRICT (every item): an adapter function leaves its arguments unchanged,
except where the interface says otherwise (gradient clipping scales the
gradients in place, load_checkpoint fills the model and optimizer,
save_checkpoint writes its file, a sampler advances its generator).

SPEC.md: every call receives fresh copies of its arguments and every oracle
is computed from the suite's own copy, so a function that mutates its inputs
can neither corrupt an oracle nor be failed for it by a MUST test; the
mutation itself is reported here, per item. The worker compares each
argument after the call with a copy taken before it (conformance/judge/worker/server.py).
"""

from pathlib import Path

import pytest

from lmspec.conformance.cs336.calls import CALLS
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.profiles.cs336 import ITEMS

#: The spec item each function's mutation is reported under.
ITEM_OF = {fn: item.id for item in ITEMS for fn in item.functions if not item.should}
ITEM_OF["run_train_bpe"] = "1.2.train_bpe"
ITEM_OF["get_tokenizer"] = "1.3.encode"
ITEM_OF["get_adamw_cls"] = "3.adamw"


@pytest.mark.strict
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.spec(ITEM_OF[n]), id=n) for n in CALLS if n in ITEM_OF]
)
def test_function_leaves_its_arguments_unchanged(
    name: str, request: pytest.FixtureRequest, impl: Implementation, tmp_path: Path
) -> None:
    """STRICT: the function does not change the tensors, arrays, lists or
    dicts it is given (a copy in its own process is compared after the call)."""
    fn = request.getfixturevalue(name)  # skips when not implemented / not provided
    impl.mutations.clear()
    try:
        CALLS[name](fn, tmp_path, request.getfixturevalue)
    except Exception as exc:  # its own bugs are its item's business: nothing to compare
        if not impl.mutations:
            pytest.skip(f"{name} raised {type(exc).__name__} on a small valid call: nothing to compare")
    changed = [f"{key}: {how}" for key, how in impl.mutations if key == name or key.startswith(name + ".")]
    assert not changed, (
        f"STRICT: {name} changed its arguments in place (the suite gave it its own copies, so no result "
        f"was affected): " + "; ".join(changed[:5])
    )
