"""Oracle integrity: catch an implementation that replaces what the suite's
oracles and assertions rely on (``torch.allclose``,
``torch.nn.functional.scaled_dot_product_attention``,
``conformance.asserts.assert_close``, a tolerance, a test module's helper...)
to fake passes.

``snapshot(config)`` runs in conformance.plugin's ``pytest_configure`` *before*
the adapter is imported: it records the identity of every tracked object.
``after_adapter_import(config)`` compares right after the import, and a hook
compares again after every test phase. A change fails the test with
"tampering detected: torch.allclose replaced", puts the originals back (so
later tests are graded honestly), and adds a ``tampering`` user property that
the grader (tools/grade) reads to mark the whole run compromised. Tampering at
import time fails every test at setup, without running it.

Tracked: public callables, classes and modules of torch, torch.nn.functional,
torch.testing, torch.linalg, torch.special, numpy, numpy.testing, math,
operator, regex, pytest and the parts of _pytest and Hypothesis that decide
outcomes; every attribute of ``torch.Tensor``; selected builtins; every
function, class and tolerance of the ``conformance`` package; the globals of
collected test modules. Only tests that carry a ``spec`` marker are checked
(the meta-tests in tests/ may monkeypatch freely). Also: a TorchFunctionMode or dispatch mode left
active, a pytest plugin registered by the implementation, and an adapter that
imports conformance test modules before pytest does.

This is a detector for in-process tampering, not a sandbox: run untrusted
submissions in a container (docs/grading.md).
"""

import importlib
import importlib.util
import itertools
import os
import pkgutil
import sys
import types
from typing import Any

import pytest

_MISSING = object()
_TORCH_DIR = os.path.dirname(importlib.util.find_spec("torch").origin or "torch") + os.sep

_MODULES = (
    "math",
    "operator",
    "torch",
    "torch.nn.functional",
    "torch.testing",
    "torch.linalg",
    "torch.special",
    "numpy",
    "numpy.testing",
    "numpy.linalg",
    "regex",
    "tiktoken",
    "pytest",
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.python",
    "_pytest.outcomes",
    "_pytest.skipping",
    "_pytest.fixtures",
    "hypothesis",
    "hypothesis.core",
    "tools.grade.stream",
)
_CLASSES = (
    ("torch", "Tensor"),
    ("_pytest.reports", "TestReport"),
    ("_pytest.runner", "CallInfo"),
    ("conformance.adapter", "Adapter"),
)
_BUILTINS = [
    "abs",
    "all",
    "any",
    "bool",
    "bytes",
    "callable",
    "dict",
    "enumerate",
    "filter",
    "float",
    "frozenset",
    "getattr",
    "hasattr",
    "hash",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "object",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "str",
    "sum",
    "tuple",
    "type",
    "zip",
]


def _trackable(value: Any, tolerances: bool = False) -> bool:
    """Functions, classes and modules; with ``tolerances``, also the suite's
    Tolerance constants. Plain values are left out: modules rebind caches."""
    if callable(value) or isinstance(value, types.ModuleType):
        return True
    return tolerances and type(value).__name__ == "Tolerance"


class _Entry:
    __slots__ = ("label", "name", "namespace", "original", "owner")

    def __init__(self, label: str, owner: Any, namespace: Any, name: str, original: Any):
        self.label, self.owner, self.namespace, self.name, self.original = (
            label,
            owner,
            namespace,
            name,
            original,
        )

    def changed(self) -> bool:
        return self.namespace.get(self.name, _MISSING) is not self.original

    def describe(self) -> str:
        now = self.namespace.get(self.name, _MISSING)
        if now is _MISSING:
            return f"{self.label} deleted"
        if self.original is _MISSING:
            return f"{self.label} added (shadows the inherited one)"
        return f"{self.label} replaced"

    def benign(self) -> bool:
        """torch wrapping its own function (importing torch._dynamo wraps
        torch.manual_seed with functools.wraps): accepted as the new original."""
        now = self.namespace.get(self.name, _MISSING)
        code = getattr(now, "__code__", None)
        return (
            getattr(now, "__wrapped__", None) is self.original
            and code is not None
            and code.co_filename.startswith(_TORCH_DIR)
        )

    def restore(self) -> None:
        try:
            if isinstance(self.owner, type):
                if self.original is _MISSING:
                    delattr(self.owner, self.name)
                else:
                    setattr(self.owner, self.name, self.original)
            elif self.original is _MISSING:
                self.namespace.pop(self.name, None)
            else:
                self.namespace[self.name] = self.original
        except (AttributeError, TypeError):  # best effort: the test already failed
            pass


def _module_entries(name: str, private: bool) -> list[_Entry]:
    module = sys.modules.get(name)
    if module is None:
        try:
            module = importlib.import_module(name)
        except Exception:  # an optional or unfinished module is simply not tracked
            return []
    ns = vars(module)
    entries = []
    for key, value in list(ns.items()):
        if key.startswith("__") or (not private and key.startswith("_")):
            continue
        if _trackable(value, tolerances=private):
            entries.append(_Entry(f"{name}.{key}", module, ns, key, value))
    return entries


def _conformance_modules() -> list[str]:
    """Every non-test module of the conformance package (imported now, before
    the implementation under test can patch them)."""
    import conformance

    names = []
    for info in pkgutil.walk_packages(conformance.__path__, "conformance."):
        if info.name.rsplit(".", 1)[-1].startswith("test_"):
            continue
        names.append(info.name)
    return names


def _build_entries() -> list[_Entry]:
    entries: list[_Entry] = []
    for name in _MODULES:
        entries += _module_entries(name, private=False)
    for name in _conformance_modules():
        entries += _module_entries(name, private=True)
    import builtins

    bns = vars(builtins)
    entries += [_Entry(f"builtins.{n}", builtins, bns, n, bns[n]) for n in _BUILTINS if n in bns]
    for modname, clsname in _CLASSES:
        cls = getattr(sys.modules.get(modname), clsname, None)
        if not isinstance(cls, type):
            continue
        proxy = cls.__dict__
        for key in dir(cls):
            if key in ("__dict__", "__weakref__", "__doc__", "__annotations__"):
                continue
            entries.append(_Entry(f"{modname}.{clsname}.{key}", cls, proxy, key, proxy.get(key, _MISSING)))
    return entries


def _mode_findings() -> list[str]:
    """Torch function/dispatch modes left active outside any test code; popped."""
    torch = sys.modules.get("torch")
    found: list[str] = []
    if torch is None:
        return found
    for kind, length, pop in (
        ("TorchFunctionMode", "_len_torch_function_stack", "_pop_torch_function_stack"),
        ("TorchDispatchMode", "_len_torch_dispatch_stack", "_pop_torch_dispatch_stack"),
    ):
        n_fn, pop_fn = getattr(torch._C, length, None), getattr(torch._C, pop, None)
        if n_fn is None or pop_fn is None:
            continue
        while n_fn() > 0:
            mode = pop_fn()
            found.append(f"a {kind} ({type(mode).__name__}) was left active")
    return found


def _fast_view(entries: list[_Entry]) -> list[tuple[Any, list[str], list[Any]]]:
    """Entries grouped by namespace, so a check is one C-level list compare each."""
    groups: dict[int, tuple[Any, list[str], list[Any]]] = {}
    for e in entries:
        group = groups.setdefault(id(e.namespace), (e.namespace.get, [], []))
        group[1].append(e.name)
        group[2].append(e.original)
    return list(groups.values())


def _unchanged(fast: list[tuple[Any, list[str], list[Any]]]) -> bool:
    # list == list compares identical items by identity first (no __eq__ call)
    try:
        return all(list(map(get, names, itertools.repeat(_MISSING))) == originals for get, names, originals in fast)
    except Exception:  # an __eq__ that raises means something changed
        return False


class IntegrityGuard:
    """The pytest plugin object: holds the snapshot and checks it."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.entries = _build_entries()
        self._fast = _fast_view(self.entries)
        self.plugins = {id(p) for p in config.pluginmanager.get_plugins()}
        self.modules = set(sys.modules)
        self.import_findings: list[str] = []
        self.test_module_entries: list[_Entry] = []
        self._fast_tests: list[tuple[Any, list[str], list[Any]]] = []
        self.phase_plugins: set[int] = set()

    def findings(self, entries: list[_Entry] | None = None) -> list[str]:
        entries = self.entries if entries is None else entries
        fast = self._fast if entries is self.entries else self._fast_tests
        if _unchanged(fast):
            return []
        changed = [e for e in entries if e.changed()]
        for e in [e for e in changed if e.benign()]:
            e.original = e.namespace.get(e.name, _MISSING)
            changed.remove(e)
        self._fast, self._fast_tests = (
            _fast_view(self.entries),
            _fast_view(self.test_module_entries),
        )
        out = [e.describe() for e in changed]
        for e in changed:
            e.restore()
        return out

    def after_import(self) -> None:
        found = self.findings() + _mode_findings()
        new_plugins = [p for p in self.config.pluginmanager.get_plugins() if id(p) not in self.plugins]
        found += [f"pytest plugin {self.config.pluginmanager.get_name(p)!r} registered" for p in new_plugins]
        for p in new_plugins:
            self.config.pluginmanager.unregister(p)
        early = sorted(m for m in set(sys.modules) - self.modules if m.startswith("conformance.test_"))
        found += [f"{m} imported by the implementation before the suite" for m in early]
        self.import_findings = found
        self.plugins = {id(p) for p in self.config.pluginmanager.get_plugins()}

    # --- hooks --------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        seen = set()
        for item in session.items:
            module = getattr(item, "module", None)
            if module is None or id(module) in seen:
                continue
            seen.add(id(module))
            ns = vars(module)
            for key, value in list(ns.items()):
                if not key.startswith("__") and _trackable(value):
                    self.test_module_entries.append(_Entry(f"{module.__name__}.{key}", module, ns, key, value))
        self._fast_tests = _fast_view(self.test_module_entries)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if item.get_closest_marker("spec") is None:  # meta-tests may monkeypatch freely
            return report
        pm = self.config.pluginmanager
        found = self.findings() + self.findings(self.test_module_entries) + _mode_findings()
        if call.when == "setup":
            self.phase_plugins = {id(p) for p in pm.get_plugins()}
        else:
            new = [p for p in pm.get_plugins() if id(p) not in self.phase_plugins]
            found += [f"pytest plugin {pm.get_name(p)!r} registered during the test" for p in new]
            for p in new:
                pm.unregister(p)
        if not found and self.import_findings and call.when == "setup" and report.passed:
            # the test body is not run at all: nothing the implementation does can be trusted
            found = [f"{f} at adapter import (test not run)" for f in self.import_findings]
        if found:
            message = "tampering detected: " + "; ".join(found[:5])
            if len(found) > 5:
                message += f" (and {len(found) - 5} more)"
            report.outcome = "failed"
            report.longrepr = message
            report.user_properties.append(("tampering", message))
        return report


def snapshot(config: pytest.Config) -> None:
    """Record what the suite relies on; call before importing the adapter."""
    guard = IntegrityGuard(config)
    config._lmspec_integrity = guard  # type: ignore[attr-defined]
    config.pluginmanager.register(guard, "lmspec-integrity")
    guard.plugins = {id(p) for p in config.pluginmanager.get_plugins()}


def after_adapter_import(config: pytest.Config) -> None:
    """Compare with the snapshot right after the adapter import."""
    guard = getattr(config, "_lmspec_integrity", None)
    if guard is not None:
        guard.after_import()
