"""Binders: for a profile whose curriculum names its own classes and
functions (gpt2: the book; encdec: the annotated notes), the module that
turns a reader's module into the profile's adapter functions, inside the
sandboxed worker. Each binder
``NAME.py`` defines ``prepare(data: dict[str, Path]) -> None`` (run before
the submission is imported) and ``bind(module) -> dict[str, Callable]``.
Like the rest of the worker, a binder imports only relative modules, torch,
numpy and the standard library (tiktoken where its profile needs it)."""
