"""torch.optim without importing torch.compile's machinery until it is used.

``torch.optim.Optimizer``'s ``add_param_group``, ``zero_grad``,
``state_dict`` and ``load_state_dict`` are wrapped by torch in
``torch._disable_dynamo``, which imports ``torch._dynamo`` at the first
call of each to mark the method as one that compiled code must not trace.
A submission's AdamW subclasses Optimizer, so its constructor's
``add_param_group`` imported ``torch._dynamo`` in every grading: 2.5 to
3.9 s of the worker's CPU (BENCHMARKS.md section 7), for a mark that
matters only under ``torch.compile``.

``defer()`` gives each such method a stand-in for that mark which calls the
method directly while ``torch._dynamo`` has not been imported (nothing can
be compiling then), and hands the call back to torch's own wrapper once it
has been (a submission that compiles gets torch's behaviour unchanged).
torch caches the mark on the wrapped function as ``__dynamo_disable``
(torch 2.5 and later); a torch whose wrapper does not read that
attribute is left as it is.
"""

import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["defer"]

_MARK = "__dynamo_disable"


def _wrappers(code: Any) -> Iterator[Callable]:
    """torch's ``_disable_dynamo`` wrappers in torch.optim: Optimizer's methods and its subclasses'
    (torch.optim's own optimizers), and the ones module functions close over."""
    import torch.optim

    seen: set[int] = set()
    todo: list[Any] = [torch.optim.Optimizer, *torch.optim.Optimizer.__subclasses__()]
    for name in list(sys.modules):
        if name.startswith("torch.optim."):
            todo += list(vars(sys.modules[name]).values())
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, type) and obj.__module__.startswith("torch.optim"):
            todo += list(vars(obj).values())
        elif callable(obj) and getattr(obj, "__code__", None) is code:
            yield obj
        elif getattr(obj, "__module__", None) and str(obj.__module__).startswith("torch.optim"):
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
    """Give every ``_disable_dynamo`` wrapper of torch.optim that has not been called yet the
    stand-in; how many got one (0 when torch._dynamo is imported already, or torch's wrapper is
    not the kind this knows)."""
    import torch

    if "torch._dynamo" in sys.modules:
        return 0
    code = torch._disable_dynamo(lambda: None).__code__
    if _MARK not in code.co_consts or "fn" not in code.co_freevars:
        return 0
    index = code.co_freevars.index("fn")
    count = 0
    for wrapper in _wrappers(code):
        fn = wrapper.__closure__[index].cell_contents
        if getattr(fn, _MARK, None) is None:
            setattr(fn, _MARK, _stand_in(wrapper, fn))
            count += 1
    return count
