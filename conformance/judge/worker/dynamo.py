"""torch.optim without importing torch.compile's machinery until it is used.

``torch.optim.Optimizer``'s ``add_param_group``, ``zero_grad``,
``state_dict`` and ``load_state_dict`` are wrapped by torch in
``torch._disable_dynamo``, which imports ``torch._dynamo`` at the first
call of each to mark the method as one that compiled code must not trace;
so are FlopCounterMode's dispatch and torch's decompositions.
A submission's AdamW subclasses Optimizer, so its constructor's
``add_param_group`` imported ``torch._dynamo`` in every grading: 2.5 to
3.9 s of the worker's CPU (BENCHMARKS.md section 12), for a mark that
matters only under ``torch.compile``; the judge paid it again for its own
stand-in optimizers (the checkpoint tests) and its FLOP oracle. The worker
calls ``defer()`` before it imports the submission, the judge when it
starts.

``defer()`` gives each such method a stand-in for that mark which calls the
method directly while ``torch._dynamo`` has not been imported (nothing can
be compiling then), and hands the call back to torch's own wrapper once it
has been (a submission that compiles gets torch's behaviour unchanged).
torch caches the mark on the wrapped function as ``__dynamo_disable``
(torch 2.5 and later); a torch whose wrapper does not read that
attribute is left as it is.
"""

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["defer"]

_MARK = "__dynamo_disable"


#: The modules whose wrappers a grading meets (imported by ``defer`` if they are not yet: all but
#: the last are by ``import torch``, that one costs 2 ms): torch.optim (Optimizer's methods, the
#: functional optimizers), and for the judge's FLOP oracle (a GPT-2 XL forward on the meta
#: device) the decompositions it runs and the FlopCounterMode that counts them.
MODULES = (
    "torch.optim",
    "torch._refs",
    "torch._prims",
    "torch._prims_common",
    "torch._decomp",
    "torch.utils.flop_counter",
)


def _wrappers(code: Any) -> Iterator[Callable]:
    """torch's ``_disable_dynamo`` wrappers in MODULES: their functions, their classes' methods,
    and the ones those functions close over (a decorator's wrapper around a wrapper)."""
    seen: set[int] = set()
    todo: list[Any] = []
    for name in [m for m in list(sys.modules) if m.startswith(MODULES)]:
        todo += list(vars(sys.modules[name]).values())
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, type):
            todo += list(vars(obj).values()) if obj.__module__.startswith(MODULES) else []
            continue
        if getattr(obj, "__code__", None) is code:
            yield obj
        elif not str(getattr(obj, "__module__", None)).startswith(MODULES):
            continue
        todo += [c.cell_contents for c in getattr(obj, "__closure__", None) or () if _filled(c)]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def _stand_in(wrapper: Callable, fn: Callable) -> Callable:
    """Calls ``fn`` while torch._dynamo is not imported; after that, removes itself and calls
    ``wrapper`` (torch's), which then imports and marks as torch always does."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if "torch._dynamo" not in sys.modules:
            return fn(*args, **kwargs)
        if vars(fn).get(_MARK) is call:
            delattr(fn, _MARK)
        return wrapper(*args, **kwargs)

    return call


def defer() -> int:
    """Give every ``_disable_dynamo`` wrapper in MODULES that has not been called yet the
    stand-in; how many got one (0 when torch._dynamo is imported already, or this torch's wrapper
    is not the kind this knows). Never raises: a torch of another make is left as it is."""
    try:
        return _defer()
    except Exception:  # an optimisation only: whatever this torch is, the grading goes on without it
        return 0


def _defer() -> int:
    import torch

    disable = getattr(torch, "_disable_dynamo", None)
    if "torch._dynamo" in sys.modules or disable is None:
        return 0
    for name in MODULES:
        with contextlib.suppress(ImportError):  # an older torch without it
            importlib.import_module(name)
    code = disable(lambda: None).__code__
    if _MARK not in code.co_consts or "fn" not in code.co_freevars:
        return 0
    index = code.co_freevars.index("fn")
    count = 0
    for wrapper in _wrappers(code):
        fn = wrapper.__closure__[index].cell_contents
        if getattr(fn, _MARK, None) is None and hasattr(fn, "__dict__"):
            setattr(fn, _MARK, _stand_in(wrapper, fn))
            count += 1
    return count
